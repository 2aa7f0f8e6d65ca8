import {
  claimGradientReduction,
  fromTf,
  type Indices,
  isGradEnabled,
  releaseGradientReduction,
  type Tensor,
  tidy,
  whileWriting,
  withMeanCounts,
} from '@ddp/autograd';
import { checkGroup, type ProcessGroup, sharedArray } from '@ddp/comm';
import { markGradientShard, whileForwarding } from '@ddp/nn';
import { checkBooleanOptions, checkOptionNames, tf } from '@ddp/tensor';
import { agreeOnMicroBatches, gatherSchedules } from './agreement.js';
import { checkSchedule } from './check.js';
import { allReduceGradients, trainable } from './grad-sync.js';
import { checkWeights, type LossReduction, lossWeights } from './loss-weights.js';
import { warnMicroBatchNorm } from './micro-batch-norm.js';
import {
  type Channel,
  makeSchedule,
  pipelineSchedules,
  type Schedule,
  type ScheduleName,
  type Transfer,
} from './schedule.js';
import { type PipelineStage, PipelineStageError } from './stage.js';

/** One micro-batch: the first stage reads `input`, the last `target`. */
export interface MicroBatch {
  input?: Indices;
  target?: Indices;
  /** What a 'mean' loss averages over in this micro-batch (e.g. its tokens not ignored); default: the target's
   * non-negative entries. */
  count?: number;
}

export interface PipelineStepOptions {
  /** The pipeline group: its rank r runs stage r. */
  ppGroup: ProcessGroup;
  /** Shape of one micro-batch's activation between stages, e.g. [batch, seq, dModel]. */
  activationShape: number[];
  /** 'afab' or '1f1b' (default), or an explicit schedule for this stage. */
  schedule?: ScheduleName | Schedule;
  /** Data-parallel replicas of this stage: gradients are averaged over it after the last micro-batch's backward. */
  dpGroup?: ProcessGroup;
  /** How lossFn reduces a micro-batch: 'mean' (default; micro-batches weighted by their counts) or 'sum' (by 1). */
  lossReduction?: LossReduction;
  /** Simulate every stage's schedule before running (default true; an explicit one is all-gathered every step). */
  check?: boolean;
}

export interface PipelineStepResult {
  /** Mean loss over the micro-batches on the last stage; null elsewhere. */
  loss: number | null;
  /** Most micro-batches whose activations were held (forward done, backward not) at once. */
  peakLiveActivations: number;
  /** Most tf bytes allocated, sampled after each forward. */
  peakBytes: number;
  /** Time spent in forwards and backwards, and in the whole step (ms); 1 − compute / elapsed is this stage's bubble. */
  computeMs: number;
  elapsedMs: number;
}

const TAG: Record<Channel, number> = { activation: 0, gradient: 1 };
const checked = new Set<string>();
const flatBuffers = new WeakMap<PipelineStage, Float32Array>();

/** The stage's shared buffer for the data-parallel all-reduce of its gradients (new when a layer is (un)frozen). */
function flatGradients(stage: PipelineStage): Float32Array {
  const total = trainable(stage.parameters()).reduce((n, p) => n + p.size, 0);
  let flat = flatBuffers.get(stage);
  if (flat?.length !== total) {
    flat = sharedArray(Float32Array, total);
    flatBuffers.set(stage, flat);
  }
  return flat;
}

/** A micro-batch's tensors kept from its forward to its backward. */
interface Stash {
  /** The received activation (a leaf that collects its gradient), null on the first stage. */
  input: Tensor | null;
  /** The stage output, or the scaled loss on the last stage. */
  output: Tensor;
}

const noTarget = (stage: PipelineStage, mb: number): never => {
  throw new PipelineStageError(`stage ${stage.stage}: micro-batch ${mb} has no target`);
};

/**
 * Runs one training step of a pipeline stage over `microBatches`: forwards and backwards in the
 * order of the schedule, activations and their gradients sent point to point on `ppGroup`.
 * Each micro-batch's loss is weighted (`lossReduction`, `MicroBatch.count`) so that the accumulated
 * gradients are those of the whole batch's loss.
 * With `dpGroup`, gradients are averaged across the replicas once, after the last micro-batch's
 * backward. The caller steps the optimizer and zeroes the gradients.
 */
export async function pipelineStep(
  stage: PipelineStage,
  microBatches: MicroBatch[],
  opts: PipelineStepOptions,
): Promise<PipelineStepResult> {
  // it backwards every micro-batch: under noGrad the last stage's backward failed alone, untyped, and the
  // others waited in their receives until the timeout, the group dead after (probe BA)
  if (!isGradEnabled())
    throw new PipelineStageError(
      `stage ${stage.stage}: pipelineStep trains (forward and backward of every micro-batch) and cannot run ` +
        "under noGrad; for evaluation run each stage's forward and pass the activations on yourself",
    );
  checkGroup(opts.ppGroup, 'pipelineStep (ppGroup)');
  checkGroup(opts.dpGroup, 'pipelineStep (dpGroup)'); // a Promise (newGroup not awaited): no replica was averaged
  // a step not awaited, then the next: the two schedules' transfers met each other until the timeout
  if (running.has(stage))
    throw new PipelineStageError(`stage ${stage.stage}: pipelineStep while the last one still runs (not awaited)`);
  // averaged over dpGroup here: a wrapper reducing them too (DDP; ZeRO stage 2, whose non-owners free
  // theirs, so the average met zeros) gave half the gradient, silently
  const reduced =
    opts.dpGroup && opts.dpGroup.size > 1 ? stage.namedParameters().map(([name, param]) => ({ name, param })) : [];
  claimGradientReduction(stage, reduced, 'pipelineStep (dpGroup)', (message) => new PipelineStageError(message));
  warnMicroBatchNorm(stage, microBatches.length);
  running.add(stage);
  try {
    // the optimizer refuses the gradients, and eval() the stage, until the step is awaited
    return await whileWriting(stage.parameters(), 'pipelineStep()', 'gradients', () =>
      whileForwarding(stage, 'pipelineStep', () => runSchedule(stage, microBatches, opts)),
    );
  } finally {
    running.delete(stage);
    releaseGradientReduction(stage, reduced);
  }
}

const running = new WeakSet<PipelineStage>();

async function runSchedule(
  stage: PipelineStage,
  microBatches: MicroBatch[],
  opts: PipelineStepOptions,
): Promise<PipelineStepResult> {
  const m = microBatches.length;
  const known = ['ppGroup', 'activationShape', 'schedule', 'dpGroup', 'lossReduction', 'check'];
  checkOptionNames('pipelineStep', opts, known, (m) => new PipelineStageError(m));
  checkBooleanOptions('pipelineStep', opts, ['check'], (m) => new PipelineStageError(m));
  const { ppGroup, activationShape, dpGroup, schedule: named = '1f1b' } = opts;
  if (ppGroup.size !== stage.numStages || ppGroup.rank !== stage.stage) {
    throw new PipelineStageError(
      `pipelineStep: stage ${stage.stage} of ${stage.numStages} runs on pp-group rank ${ppGroup.rank} of ` +
        `${ppGroup.size}; they must agree`,
    );
  }
  const count = activationShape.reduce((a, b) => a * b, 1);
  if (ppGroup.size > 1) await agreeOnMicroBatches(stage, ppGroup, m, activationShape);
  // each stage holds its own parameters: the model's gradient norm sums over the stages (clipGradNormDistributed)
  if (ppGroup.size > 1) for (const p of stage.parameters()) markGradientShard(p, ppGroup);
  let schedule: Schedule;
  if (typeof named === 'string') {
    const key = `${named}/${stage.numStages}/${m}`;
    if ((opts.check ?? true) && !checked.has(key)) {
      checkSchedule(pipelineSchedules(named, stage.numStages, m), m);
      checked.add(key);
    }
    schedule = makeSchedule(named, stage.stage, stage.numStages, m);
  } else {
    schedule = named;
    if (opts.check ?? true) checkSchedule(ppGroup.size > 1 ? await gatherSchedules(schedule, ppGroup) : [schedule], m);
  }

  const targets = stage.isLast ? microBatches.map((b, mb) => b.target ?? noTarget(stage, mb)) : [];
  const counts = microBatches.map((b) => b.count);
  const weights = lossWeights(targets, counts, opts.lossReduction ?? 'mean', stage.stage);
  /** What each micro-batch's loss averaged over, where one 'mean' loss reported it (checkWeights). */
  const averaged: (number | null)[] = [];
  const stash = new Map<number, Stash>();
  const received = { activation: new Map<number, Float32Array>(), gradient: new Map<number, Float32Array>() };
  const toSend = { activation: new Map<number, Float32Array>(), gradient: new Map<number, Float32Array>() };
  const lastBackward = schedule.map((a) => a.op).lastIndexOf('backward');
  let loss = 0;
  let peakLive = 0;
  let peakBytes = 0;
  let gradSync: Promise<void> | null = null;

  const take = <T>(map: Map<number, T>, mb: number, what: string): T => {
    const v = map.get(mb);
    if (v === undefined) throw new PipelineStageError(`stage ${stage.stage}: no ${what} for micro-batch ${mb}`);
    map.delete(mb);
    return v;
  };

  const forward = (mb: number): void => {
    const batch = microBatches[mb];
    if (!batch) throw new PipelineStageError(`stage ${stage.stage}: the schedule forwards micro-batch ${mb} of ${m}`);
    let input: Tensor | null = null;
    if (!stage.isFirst)
      input = fromTf(tf.tensor(take(received.activation, mb, 'received activation'), activationShape), {
        requiresGrad: true,
      });
    let output: Tensor | null = null;
    try {
      const x = input ?? batch.input;
      if (x === undefined) throw new PipelineStageError(`stage 0: micro-batch ${mb} has no input`);
      if (stage.isLast) {
        const weighted = withMeanCounts(() => tidy(() => stage.loss(stage.forward(x), targets[mb]).mul(weights[mb])));
        output = weighted.value;
        averaged[mb] = weighted.counts.length === 1 ? weighted.counts[0] : null;
        loss += output.item();
      } else {
        output = tidy(() => stage.forward(x));
        // the same size in another shape (a [seq, batch, dim] output) would be read as another layout, silently
        const shape = output.shape;
        if (shape.length !== activationShape.length || shape.some((d, i) => d !== activationShape[i])) {
          throw new PipelineStageError(
            `stage ${stage.stage}: micro-batch ${mb}'s output has shape [${output.shape.join(', ')}], not the ` +
              `activationShape [${activationShape.join(', ')}] the next stage receives`,
          );
        }
        toSend.activation.set(mb, output.dataSync() as Float32Array); // a read-only view is enough: the send copies it
      }
    } catch (e) {
      output?.dispose();
      input?.dispose();
      throw e;
    }
    stash.set(mb, { input, output });
    peakLive = Math.max(peakLive, stash.size);
    peakBytes = Math.max(peakBytes, tf.memory().numBytes);
  };

  const backward = async (mb: number, index: number): Promise<void> => {
    const { input, output } = take(stash, mb, 'stashed forward');
    const grad = stage.isLast ? null : tf.tensor(take(received.gradient, mb, 'received gradient'), activationShape);
    try {
      // a first stage with nothing trainable: nothing upstream of its output needs a gradient
      if (input || output.requiresGrad) await output.backward(grad ?? undefined);
      if (input) {
        if (!input.grad)
          throw new PipelineStageError(`stage ${stage.stage}: micro-batch ${mb}'s input got no gradient`);
        toSend.gradient.set(mb, input.grad.dataSync() as Float32Array);
      }
    } finally {
      grad?.dispose();
      output.dispose();
      input?.dispose();
    }
    if (index === lastBackward && dpGroup && dpGroup.size > 1) {
      gradSync = allReduceGradients(stage.parameters(), dpGroup, flatGradients(stage));
      // awaited at the end of the step; this only keeps an earlier failure from going unhandled
      gradSync.catch(() => undefined);
    }
  };

  const communicate = async (transfers: Transfer[]): Promise<void> => {
    const ops = transfers.map((t) => {
      const buf =
        t.kind === 'send' ? take(toSend[t.channel], t.microBatch, `${t.channel} to send`) : new Float32Array(count);
      if (t.kind === 'recv') received[t.channel].set(t.microBatch, buf);
      return {
        op: t.kind === 'send' ? ('isend' as const) : ('irecv' as const),
        buf,
        peer: t.peer,
        tag: TAG[t.channel],
      };
    });
    await ppGroup.batchIsendIrecv(ops).wait();
  };

  const start = performance.now();
  let computeMs = 0;
  try {
    for (const [i, a] of schedule.entries()) {
      const t0 = performance.now();
      if (a.op === 'forward') forward(a.microBatch);
      else if (a.op === 'backward') await backward(a.microBatch, i);
      else await communicate(a.transfers);
      if (a.op !== 'comm') computeMs += performance.now() - t0;
    }
    await gradSync;
    if (stage.isLast && (opts.lossReduction ?? 'mean') === 'mean') checkWeights(averaged, weights, counts, stage.stage);
    if (stash.size > 0)
      throw new PipelineStageError(
        `stage ${stage.stage}: the schedule never backwards micro-batch ${[...stash.keys()].join(', ')}: ` +
          'its gradient would be dropped',
      );
  } finally {
    for (const { input, output } of stash.values()) {
      input?.dispose();
      output.dispose();
    }
  }
  return {
    loss: stage.isLast ? loss : null,
    peakLiveActivations: peakLive,
    peakBytes,
    computeMs,
    elapsedMs: performance.now() - start,
  };
}
