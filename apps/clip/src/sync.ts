import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';

// STOPGAP until @ddp/reducer's DistributedDataParallel lands: average every gradient over the
// ranks in one flat all-reduce after backward (no buckets, no overlap with backward).
export async function averageGradients(params: Parameter[], group: ProcessGroup): Promise<void> {
  if (group.size === 1) return;
  const sizes = params.map((p) => p.size);
  const flat = new Float32Array(sizes.reduce((a, b) => a + b, 0));
  let at = 0;
  for (const p of params) {
    if (p.grad) flat.set(p.grad.dataSync() as Float32Array, at);
    at += p.size;
  }
  await group.allReduce(flat, { op: ReduceOp.AVG }).wait();
  at = 0;
  for (const p of params) {
    p.grad = tf.tensor(flat.subarray(at, at + p.size), p.shape);
    at += p.size;
  }
}
