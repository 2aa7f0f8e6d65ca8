import { ReduceOp } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { allreduceHook, type CommHook, type GradBucket } from './comm-hooks.js';
import { orthonormalizeColumns } from './orthonormalize.js';
import type { MatrixSlot, PowerSGDState } from './powersgd.js';
import { warnErrorNotFinite } from './powersgd-warnings.js';

/** [n, k] and [m, k] views of row-major data for tf. */
const mat = (data: Float32Array, offset: number, rows: number, cols: number) =>
  tf.tensor2d(data.subarray(offset, offset + rows * cols), [rows, cols]);

async function compress(state: PowerSGDState, bucket: GradBucket): Promise<Float32Array> {
  const { buffer, processGroup: group } = bucket;
  const b = state.stateOf(bucket);
  if (b.error) for (let i = 0; i < buffer.length; i++) buffer[i] += b.error[i];
  const input = state.useErrorFeedback ? buffer.slice() : null;
  // the other tensors: one all-reduce of their concatenation
  let at = 0;
  for (const t of b.plain) {
    b.plainBuf.set(buffer.subarray(t.offset, t.offset + t.size), at);
    at += t.size;
  }
  const plainWork = b.plainBuf.length > 0 ? group.allReduce(b.plainBuf, { op: ReduceOp.AVG }) : null;
  // P = M Q for every matrix, summed over ranks, orthonormalized; Q = Mᵀ P averaged over ranks; M ≈ P Qᵀ
  const each = (fn: (x: MatrixSlot, pAt: number, qAt: number) => void) => {
    let pAt = 0;
    let qAt = 0;
    for (const x of b.matrices) {
      fn(x, pAt, qAt);
      pAt += x.n * x.r;
      qAt += x.m * x.r;
    }
  };
  each(({ offset, n, m, r }, pAt, qAt) =>
    b.p.set(
      tf.tidy(() => tf.matMul(mat(buffer, offset, n, m), mat(b.q, qAt, m, r)).dataSync() as Float32Array),
      pAt,
    ),
  );
  await group.allReduce(b.p, { op: ReduceOp.SUM }).wait();
  each(({ offset, n, m, r }, pAt, qAt) => {
    orthonormalizeColumns(b.p, pAt, n, r);
    b.q.set(
      tf.tidy(() => tf.matMul(mat(buffer, offset, n, m), mat(b.p, pAt, n, r), true, false).dataSync() as Float32Array),
      qAt,
    );
  });
  await group.allReduce(b.q, { op: ReduceOp.AVG }).wait();
  each(({ offset, n, m, r }, pAt, qAt) =>
    buffer.set(
      tf.tidy(() => tf.matMul(mat(b.p, pAt, n, r), mat(b.q, qAt, m, r), false, true).dataSync() as Float32Array),
      offset,
    ),
  );
  await plainWork?.wait();
  at = 0;
  for (const t of b.plain) {
    buffer.set(b.plainBuf.subarray(at, at + t.size), t.offset);
    at += t.size;
  }
  if (input !== null) {
    let finite = true;
    for (let i = 0; i < input.length; i++) {
      input[i] -= buffer[i];
      finite &&= Number.isFinite(input[i]);
    }
    b.error = input;
    if (!finite) warnErrorNotFinite();
  }
  return buffer;
}

/**
 * PowerSGD (Vogels et al. 2019; PyTorch's powerSGD_hook): each gradient matrix M (n × m)
 * travels as P (n × r) and Q (m × r), r ≪ n, m; the compression error is added back to the
 * next iteration's gradient (error feedback) and Q is reused (warm start). Tensors of rank
 * 1 and matrices too small to gain are all-reduced as they are.
 */
export const powerSGDHook: CommHook<PowerSGDState> = (state, bucket) => {
  const vanilla = state.iter < state.startIter;
  const run = state.chain.then(() =>
    vanilla
      ? allreduceHook(null, { ...bucket, arrays: [bucket.buffer] }).then(() => bucket.buffer)
      : compress(state, bucket),
  );
  state.chain = run.catch(() => {});
  if (bucket.isLast) state.iter++;
  return run;
};
