import type { Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp, sharedArray } from '@ddp/comm';
import { copyTensorInto, tensorFromFloat32 } from '@ddp/tensor';

/** What a stage's gradient sync averages: the parameters that require grad (a frozen one is left alone). */
export const trainable = (params: Tensor[]): Tensor[] => params.filter((p) => p.requiresGrad);

/**
 * Averages the gradients of `params` over `group` in one all-reduce of a flat buffer (the
 * data-parallel sync of a pipeline stage, run once per step rather than per micro-batch).
 * Only parameters that require grad take part: a trainable one without a gradient contributes
 * zeros and receives the average; a frozen one keeps no gradient (a zero one would be stepped
 * by weight decay and momentum). Pass `flat` (a `sharedArray` of the trainable parameters'
 * total size) to reuse one buffer across steps.
 */
export async function allReduceGradients(all: Tensor[], group: ProcessGroup, flat?: Float32Array): Promise<void> {
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
  await group.allReduce(flat, { op: ReduceOp.AVG }).wait();
  off = 0;
  for (const p of params) {
    p.grad = tensorFromFloat32(flat.subarray(off, off + p.size), p.shape); // a copy: the buffer is reused next step
    off += p.size;
  }
}
