import { ReduceOp, sharedArray } from '@ddp/comm';
import { Generator } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { allreduceHook, type CommHook, type GradBucket } from './comm-hooks.js';

export interface PowerSGDOptions {
  /** Rank r of the approximation M ≈ P Qᵀ (default 1). */
  matrixApproximationRank?: number;
  /** Plain all-reduce for this many iterations first (PyTorch's start_powerSGD_iter; default 10). */
  startPowerSGDIter?: number;
  /** Add last iteration's compression error to the gradient before compressing (default true). */
  useErrorFeedback?: boolean;
  /** Reuse last iteration's Q as the starting point (one power iteration per step; default true). */
  warmStart?: boolean;
  /** Seed of the random initial Q (the same on every rank). */
  seed?: number;
}

/** A bucket's matrices (compressed) and its other tensors (all-reduced as they are). */
interface Layout {
  matrices: { offset: number; n: number; m: number; r: number }[];
  plain: { offset: number; size: number }[];
  plainSize: number;
  pSize: number;
  qSize: number;
}

/** PowerSGD's state (PyTorch's PowerSGDState): error feedback and warm-start Qs per bucket. */
export class PowerSGDState {
  readonly rank: number;
  readonly startIter: number;
  readonly useErrorFeedback: boolean;
  readonly warmStart: boolean;
  /** Completed iterations (counted on each last bucket). */
  iter = 0;
  readonly errors = new Map<number, Float32Array>();
  readonly qs = new Map<number, Float32Array>();
  private readonly layouts = new Map<number, Layout>();
  private readonly generator: Generator;
  /** Buckets are processed one after the other, so every rank issues the same collectives in the same order. */
  chain: Promise<unknown> = Promise.resolve();

  constructor(opts: PowerSGDOptions = {}) {
    this.rank = opts.matrixApproximationRank ?? 1;
    this.startIter = opts.startPowerSGDIter ?? 10;
    this.useErrorFeedback = opts.useErrorFeedback ?? true;
    this.warmStart = opts.warmStart ?? true;
    this.generator = new Generator(opts.seed ?? 0);
  }

  layoutOf(bucket: GradBucket): Layout {
    let layout = this.layouts.get(bucket.index);
    if (layout === undefined) {
      layout = { matrices: [], plain: [], plainSize: 0, pSize: 0, qSize: 0 };
      for (const s of bucket.parameters) {
        const n = s.shape[0] ?? 1;
        const m = s.size / n;
        const r = Math.min(this.rank, n, m);
        // compress only matrices whose factors are smaller than the matrix itself
        if (s.shape.length >= 2 && (n + m) * r < n * m) {
          layout.matrices.push({ offset: s.offset, n, m, r });
          layout.pSize += n * r;
          layout.qSize += m * r;
        } else {
          layout.plain.push({ offset: s.offset, size: s.size });
          layout.plainSize += s.size;
        }
      }
      this.layouts.set(bucket.index, layout);
    }
    return layout;
  }

  /** The Q of each matrix of the bucket: last iteration's (warm start) or fresh standard normal. */
  initialQ(bucket: GradBucket, qSize: number): Float32Array {
    const kept = this.warmStart ? this.qs.get(bucket.index) : undefined;
    if (kept !== undefined) return kept;
    const q = this.generator.normal(qSize);
    if (this.warmStart) this.qs.set(bucket.index, q);
    return q;
  }
}

/** Gram-Schmidt on the r columns of the row-major [n, r] matrix at p[offset…]. */
function orthonormalizeColumns(p: Float32Array, offset: number, n: number, r: number): void {
  for (let i = 0; i < r; i++) {
    for (let j = 0; j < i; j++) {
      let dot = 0;
      for (let k = 0; k < n; k++) dot += p[offset + k * r + i]! * p[offset + k * r + j]!;
      for (let k = 0; k < n; k++) p[offset + k * r + i]! -= dot * p[offset + k * r + j]!;
    }
    let norm = 0;
    for (let k = 0; k < n; k++) norm += p[offset + k * r + i]! ** 2;
    norm = Math.sqrt(norm) + 1e-8;
    for (let k = 0; k < n; k++) p[offset + k * r + i]! /= norm;
  }
}

async function compress(state: PowerSGDState, bucket: GradBucket): Promise<Float32Array> {
  const { buffer, processGroup: group } = bucket;
  const layout = state.layoutOf(bucket);
  if (state.useErrorFeedback) {
    const error = state.errors.get(bucket.index);
    if (error) for (let i = 0; i < buffer.length; i++) buffer[i]! += error[i]!;
  }
  const input = state.useErrorFeedback ? buffer.slice() : null;
  // the other tensors: one all-reduce of their concatenation
  const plain = sharedArray(Float32Array, layout.plainSize);
  let at = 0;
  for (const t of layout.plain) {
    plain.set(buffer.subarray(t.offset, t.offset + t.size), at);
    at += t.size;
  }
  const plainWork = layout.plainSize > 0 ? group.allReduce(plain, { op: ReduceOp.AVG }) : null;
  // P = M Q for every matrix, all-reduced (summed) together, then orthonormalized
  const q = state.initialQ(bucket, layout.qSize);
  const p = sharedArray(Float32Array, layout.pSize);
  let pAt = 0;
  let qAt = 0;
  for (const { offset, n, m, r } of layout.matrices) {
    p.set(tf.tidy(() => tf.matMul(tf.tensor2d(buffer.subarray(offset, offset + n * m), [n, m]), tf.tensor2d(q.subarray(qAt, qAt + m * r), [m, r])).dataSync() as Float32Array), pAt);
    pAt += n * r;
    qAt += m * r;
  }
  await group.allReduce(p, { op: ReduceOp.SUM }).wait();
  // Q = Mᵀ P, averaged over ranks; then M ≈ P Qᵀ
  const qNew = sharedArray(Float32Array, layout.qSize);
  pAt = 0;
  qAt = 0;
  for (const { offset, n, m, r } of layout.matrices) {
    orthonormalizeColumns(p, pAt, n, r);
    qNew.set(tf.tidy(() => tf.matMul(tf.tensor2d(buffer.subarray(offset, offset + n * m), [n, m]), tf.tensor2d(p.subarray(pAt, pAt + n * r), [n, r]), true, false).dataSync() as Float32Array), qAt);
    pAt += n * r;
    qAt += m * r;
  }
  await group.allReduce(qNew, { op: ReduceOp.AVG }).wait();
  pAt = 0;
  qAt = 0;
  for (const { offset, n, m, r } of layout.matrices) {
    buffer.set(tf.tidy(() => tf.matMul(tf.tensor2d(p.subarray(pAt, pAt + n * r), [n, r]), tf.tensor2d(qNew.subarray(qAt, qAt + m * r), [m, r]), false, true).dataSync() as Float32Array), offset);
    pAt += n * r;
    qAt += m * r;
  }
  if (state.warmStart) state.qs.set(bucket.index, qNew.slice());
  await plainWork?.wait();
  at = 0;
  for (const t of layout.plain) {
    buffer.set(plain.subarray(at, at + t.size), t.offset);
    at += t.size;
  }
  if (input !== null) {
    for (let i = 0; i < input.length; i++) input[i]! -= buffer[i]!;
    state.errors.set(bucket.index, input);
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
  const run = state.chain.then(() => (vanilla ? allreduceHook(null, bucket) : compress(state, bucket)));
  state.chain = run.catch(() => {});
  if (bucket.isLast) state.iter++;
  return run;
};
