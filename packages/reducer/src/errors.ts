import { PeerLostError } from '@ddp/comm';

/** Base class of every error @ddp/reducer raises. */
export class DDPError extends Error {
  override name = 'DDPError';
}

/** Ranks hold models whose parameters differ in number, name or shape. */
export class ParameterMismatchError extends DDPError {
  override name = 'ParameterMismatchError';
  constructor(
    readonly parameter: string,
    readonly ranks: number[],
    detail: string,
  ) {
    super(`DistributedDataParallel: parameter "${parameter}" differs between ranks ${ranks.join(' and ')}: ${detail}`);
  }
}

/**
 * Some parameters took part in no gradient this backward (without findUnusedParameters).
 * Raised on every rank with the union of every rank's unused parameters.
 */
export class UnusedParametersError extends DDPError {
  override name = 'UnusedParametersError';
  constructor(
    readonly parameters: string[],
    readonly rank: number,
    readonly iteration: number,
  ) {
    super(
      `DistributedDataParallel (rank ${rank}, iteration ${iteration}): ${parameters.length} parameter(s) ` +
        `received no gradient in this backward: ${parameters.join(', ')}. Either they were not used to ` +
        `compute the loss (pass findUnusedParameters: true to DistributedDataParallel.create, or set ` +
        `requiresGrad = false on parameters you never train), or the loss does not depend on them in this iteration.`,
    );
  }
}

/** A gradient averaged over the ranks holds NaN or Infinity (checkFinite option). */
export class NonFiniteGradientError extends DDPError {
  override name = 'NonFiniteGradientError';
  constructor(
    readonly parameter: string,
    readonly value: number,
    readonly iteration: number,
  ) {
    super(
      `DistributedDataParallel (iteration ${iteration}): the gradient of "${parameter}" holds ${value} after ` +
        'the all-reduce (some rank produced a non-finite gradient; under a GradScaler, which skips such a step ' +
        'itself, create DDP with checkFinite: false)',
    );
  }
}

/**
 * A gradient collective failed (a peer lost, a timeout, ranks issuing different
 * collectives). The usual cause is uneven inputs: one rank left the training loop while
 * the others still call backward.
 */
export class DDPCommError extends DDPError {
  override name = 'DDPCommError';
  constructor(
    readonly rank: number,
    readonly operation: string,
    readonly iteration: number,
    override readonly cause: unknown,
    /** Whether the loop runs under join: then uneven batches are not the cause, unshadowed collectives are. */
    underJoin = false,
  ) {
    const why = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    // a peer that ended its loop early destroys its group ("has left"): uneven inputs; any other loss is a fault
    const lost = cause instanceof PeerLostError && !/has left/.test(cause.message);
    const hint = lost
      ? "A peer was lost (killed, crashed or unreachable): its own output says why; ddp-run's --max-restarts " +
        'restarts the world, to resume from the last checkpoint.'
      : underJoin
        ? 'The loop runs under join, which shadows the collectives of its joinables only: a collective in the ' +
          "model's forward (SyncBatchNorm) or in the loop is not shadowed once a rank has joined (torch does not " +
          'support it either); if parameters get gradients on some ranks only, pass findUnusedParameters: true.'
        : 'If ranks have different numbers of batches, wrap the training loop in join([ddp], ...) from @ddp/join; ' +
          'if parameters get gradients on some ranks only, pass findUnusedParameters: true.';
    super(`DistributedDataParallel (rank ${rank}, iteration ${iteration}): ${operation} failed: ${why}. ${hint}`);
  }
}

/** Misuse of the DDP API (backward during a pending reduction, bad options). */
export class DDPUsageError extends DDPError {
  override name = 'DDPUsageError';
}

/**
 * The wasm heap moved while gradients were reduced in place there (V8 grew it by copying):
 * the averages went to the old memory. DDP copies gradients into its buckets from then on.
 */
export class GradientStorageMovedError extends DDPError {
  override name = 'GradientStorageMovedError';
  constructor(
    readonly rank: number,
    readonly iteration: number,
  ) {
    super(
      `DistributedDataParallel (rank ${rank}, iteration ${iteration}): the wasm heap moved during the ` +
        `gradient all-reduce; this iteration's averages are lost (redo the step; DDP copies gradients from now on)`,
    );
  }
}

/**
 * A parameter's gradient arrived twice in one backward. Its usual causes: several forwards before
 * one backward, where findUnusedParameters searched the last forward's output only; a parameter
 * used in a checkpointed segment and outside it; two backward calls without an optimizer step; under
 * findUnusedParameters, a parameter the forward left unused but the loss reads itself (an L2 penalty
 * over model.parameters(); the message left it out, probe CI).
 */
export function markedReadyTwice(name: string): DDPUsageError {
  return new DDPUsageError(
    `parameter "${name}" was marked ready twice in one backward: used by several forwards before one ` +
      'backward (under findUnusedParameters its search sees the last forward only: one backward per forward), ' +
      'in a checkpointed segment and outside it (or under findUnusedParameters inside one, where its search ' +
      'cannot see), by two backward calls without an optimizer step, or, under findUnusedParameters, by the ' +
      'loss itself on a step the forward left it unused (an L2 penalty over model.parameters(): penalise ' +
      "inside the forward, or through the optimizer's weightDecay)",
  );
}
