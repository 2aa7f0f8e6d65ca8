import type { Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp, sharedArray } from '@ddp/comm';
import { tf } from '@ddp/tensor';

/**
 * Averages the gradients of `params` over `group` in one all-reduce of a flat buffer (the
 * data-parallel sync of a pipeline stage, run once per step rather than per micro-batch).
 * A parameter without a gradient contributes zeros and receives the average.
 */
export async function allReduceGradients(params: Tensor[], group: ProcessGroup): Promise<void> {
  const total = params.reduce((n, p) => n + p.size, 0);
  const flat = sharedArray(Float32Array, total);
  let off = 0;
  for (const p of params) {
    if (p.grad) flat.set(p.grad.dataSync() as Float32Array, off);
    off += p.size;
  }
  await group.allReduce(flat, { op: ReduceOp.AVG }).wait();
  off = 0;
  for (const p of params) {
    p.grad = tf.tensor(flat.subarray(off, off + p.size), p.shape);
    off += p.size;
  }
}
