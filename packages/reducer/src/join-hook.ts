import { GradientSnapshot } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { JoinHook } from '@ddp/join';
import type { Parameter } from '@ddp/nn';
import type { DistributedDataParallel } from './ddp.js';

/**
 * DDP's side of join (PyTorch's _DDPJoinHook): a rank out of inputs all-reduces zero
 * gradients for every bucket while others still train, then the model of the last rank to
 * join is broadcast to all.
 */
export class DDPJoinHook implements JoinHook {
  /**
   * A joined rank's gradients before its first shadowed iteration, given back after join. The shadowed
   * iterations write the averages there (a Joinable optimizer, ZeRO, steps its shard with them), and
   * they stayed: the next epoch's first backward added to them (probe BP; torch's shadows write nothing).
   */
  private before: GradientSnapshot | null = null;

  constructor(private readonly ddp: DistributedDataParallel) {}

  mainHook(): Promise<void> {
    this.before ??= new GradientSnapshot(this.ddp.params.map(({ param }) => param));
    return this.ddp.shadowIteration();
  }

  async postHook(isLastJoiner: boolean): Promise<void> {
    try {
      await this.ddp.syncFinalModel(isLastJoiner);
    } finally {
      this.before?.restore();
      this.before = null;
    }
  }
}

/**
 * An iteration under join, agreed by every rank: the gradients' scale (the initial world over the
 * ranks still active, when a joined rank asks for it) and the rank to take buffers from (a
 * joined rank's stopped at its last batch: the highest one still training, as torch's).
 */
export async function joinStatus(
  active: boolean,
  divideByInitialWorldSize: boolean,
  group: ProcessGroup,
  collective: <T>(what: string, run: () => Promise<T>) => Promise<T>,
  withCommHook: boolean,
): Promise<{ scale: number; buffersFrom: number }> {
  // [ranks still active, ranks asking to divide by the active count, then 1 for each active rank]
  const status = new Int32Array(2 + group.size);
  status.set([active ? 1 : 0, !active && !divideByInitialWorldSize ? 1 : 0]);
  status[2 + group.rank] = active ? 1 : 0;
  await collective('join status all-reduce', () => group.allReduce(status).wait());
  const rescale = status[1] > 0 && status[0] > 0; // a rank asking means one has joined: fewer than N active
  // torch divides by the active count only without a comm hook: a hook's result is not a mean (Adasum of
  // g and zeros is g; rescaled it was 2g on 2 ranks), and fp16/bf16 hooks divide by the world themselves
  if (rescale && withCommHook) warnDivideIgnored();
  const scale = rescale && !withCommHook ? group.size / status[0] : 1;
  // torch's _find_common_rank: the highest rank still training (the lowest gave other running statistics
  // than torch's on every rank, 63.9 apart after 3 steps; probe AZ)
  let buffersFrom = group.size - 1;
  while (buffersFrom > 0 && status[2 + buffersFrom] !== 1) buffersFrom--;
  return { scale, buffersFrom };
}

let warnedDivideIgnored = false;
function warnDivideIgnored(): void {
  if (warnedDivideIgnored) return;
  warnedDivideIgnored = true;
  process.emitWarning(
    'join: divideByInitialWorldSize: false has no effect with a registered comm hook (as in torch): the ' +
      "hook's result is used as it is. Divide in the hook, or use DDP's default all-reduce.",
    { code: 'DDP_JOIN_DIVIDE_WITH_HOOK' },
  );
}

/**
 * An iteration's join notice (issued by DDP's forward) and the gradients of before the iteration,
 * given back when it fails (EarlyTerminationError, JoinShadowError): torch raises in forward,
 * before backward wrote any; here the notice settles at the end of backward, and this backward's
 * local gradients stayed: a caught error's next epoch averaged them into its first step (7e-2
 * off; probe DB).
 */
export class IterationNotice {
  // no bucket goes out before the notice succeeds (release): nothing writes into the snapshot's storage
  private readonly before: GradientSnapshot;

  constructor(
    /** The buckets go out once it succeeded. */
    readonly sent: Promise<unknown>,
    params: readonly { param: Parameter }[],
  ) {
    this.before = new GradientSnapshot(params.map(({ param }) => param));
    sent.then(
      () => this.release(),
      () => {},
    );
  }

  /** The next iteration's notice; `previous`, if any, is not needed any more (a forward without a backward). */
  static replacing(
    previous: IterationNotice | null,
    sent: Promise<unknown>,
    params: readonly { param: Parameter }[],
  ): IterationNotice {
    previous?.release();
    return new IterationNotice(sent, params);
  }

  /** At the end of backward: the notice's error, with the gradients of before the iteration given back. */
  async settle(): Promise<void> {
    try {
      await this.sent;
    } catch (error) {
      this.before.restore();
      throw error;
    }
  }

  /** Not needed: the notice succeeded, or a new iteration began without a backward. */
  release(): void {
    this.before.release();
  }
}
