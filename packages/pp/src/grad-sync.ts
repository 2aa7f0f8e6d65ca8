import type { Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp, sharedArray } from '@ddp/comm';
import { copyTensorInto, tensorFromFloat32 } from '@ddp/tensor';
import { PipelineStageError } from './stage.js';

/** What a stage's gradient sync averages: the parameters that require grad (a frozen one is left alone). */
export const trainable = (params: Tensor[]): Tensor[] => params.filter((p) => p.requiresGrad);

/** Per group, the layout of trainable parameters every replica was last found to share. */
const verified = new WeakMap<ProcessGroup, string>();

/**
 * Raises PipelineStageError on every replica unless they all train the same parameters: the
 * flat buffer pairs gradients by position, so a parameter frozen on some replicas only would
 * shift the others' (or, frozen in two same-sized places, average two parameters' gradients).
 * Collective; run when this replica's layout changes (every replica freezes alike, together).
 */
async function checkSameTrainable(all: Tensor[], group: ProcessGroup, layout: string): Promise<void> {
  if (verified.get(group) === layout) return;
  const flags = (await group.allGather(Int32Array.from(all, (p) => (p.requiresGrad ? 1 : 0))).wait()) as Int32Array[];
  for (let r = 1; r < flags.length; r++) {
    const i = flags[r].findIndex((f, j) => f !== flags[0][j]);
    if (i < 0) continue;
    const state = (f: number) => (f === 1 ? 'requires grad' : 'is frozen');
    throw new PipelineStageError(
      `rank ${group.ranks[group.rank]}: allReduceGradients: parameter ${i} ${state(flags[0][i])} on rank ` +
        `${group.ranks[0]} and ${state(flags[r][i])} on rank ${group.ranks[r]}: freeze the same ` +
        'parameters on every replica',
    );
  }
  verified.set(group, layout);
}

/**
 * Averages the gradients of `params` over `group` in one all-reduce of a flat buffer (the
 * data-parallel sync of a pipeline stage, run once per step rather than per micro-batch).
 * Only parameters that require grad take part: a trainable one without a gradient contributes
 * zeros and receives the average, unless no replica has a gradient for it (an unused layer),
 * which keeps none, like a frozen one (zeros would be stepped by weight decay and momentum;
 * torch DDP with find_unused_parameters leaves such a grad None). Pass `flat` (a `sharedArray`
 * of the trainable parameters' total size) to reuse one buffer across steps.
 */
export async function allReduceGradients(all: Tensor[], group: ProcessGroup, flat?: Float32Array): Promise<void> {
  await checkSameTrainable(all, group, all.map((p) => (p.requiresGrad ? p.size : -p.size)).join(','));
  const params = trainable(all);
  const total = params.reduce((n, p) => n + p.size, 0);
  if (!flat) flat = sharedArray(Float32Array, total);
  else if (flat.length !== total)
    throw new RangeError(`allReduceGradients: the buffer holds ${flat.length} values, the gradients ${total}`);
  flat.fill(0);
  let off = 0;
  for (const p of params) {
    if (p.grad) copyTensorInto(p.grad, flat, off);
    off += p.size;
  }
  // how many replicas have each parameter's gradient, summed alongside the average
  const used = Int32Array.from(params, (p) => (p.grad ? 1 : 0));
  await Promise.all([group.allReduce(used).wait(), group.allReduce(flat, { op: ReduceOp.AVG }).wait()]);
  off = 0;
  for (const [i, p] of params.entries()) {
    // a copy: the buffer is reused next step
    if (used[i] > 0) p.grad = tensorFromFloat32(flat.subarray(off, off + p.size), p.shape);
    off += p.size;
  }
}
