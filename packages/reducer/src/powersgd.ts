import { ReduceOp, sharedArray } from '@ddp/comm';
import { Generator } from '@ddp/nn';
import { checkBooleanOptions, checkNumberOptions, checkOptionNames, tf } from '@ddp/tensor';
import { allreduceHook, type CommHook, type GradBucket } from './comm-hooks.js';
import { DDPUsageError } from './errors.js';
import { orthonormalizeColumns } from './orthonormalize.js';
import { warnErrorNotFinite } from './powersgd-warnings.js';

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
  /**
   * Compress a matrix only when its elements outnumber its factors' this many times (PyTorch's
   * min_compression_rate; default 2); smaller ones are all-reduced exactly.
   */
  minCompressionRate?: number;
}

const OPTIONS = [
  'matrixApproximationRank',
  'startPowerSGDIter',
  'useErrorFeedback',
  'warmStart',
  'seed',
  'minCompressionRate',
];

interface MatrixSlot {
  /** The parameter's index in DDP's list. */
  param: number;
  offset: number;
  n: number;
  m: number;
  r: number;
}

/** One bucket's layout (matrices compressed, other tensors all-reduced as they are) and buffers. */
interface BucketState {
  matrices: MatrixSlot[];
  plain: { offset: number; size: number }[];
  /** The uncompressed tensors, concatenated. */
  plainBuf: Float32Array;
  /** Every matrix's P (n × r), then its Q (m × r), row-major, concatenated. */
  p: Float32Array;
  q: Float32Array;
  /** Last iteration's compression error (error feedback). */
  error: Float32Array | null;
  /** q holds last iteration's Q (warm start). */
  warm: boolean;
}

/** Where a parameter's state was last: its bucket's state, its offset there, and its Q's if compressed. */
interface Home {
  state: BucketState;
  offset: number;
  qAt: number | null;
}

/**
 * PowerSGD's state (PyTorch's PowerSGDState). Per bucket, keyed by the bucket's buffer; when DDP
 * lays its buckets out anew (the rebuild after the first iteration, each autotune trial), a new
 * bucket takes each parameter's error and Q from where they were, so no state is lost (torch's
 * is per bucket and starts afresh, hence its startPowerSGDIter ≥ 2: the autotune moved buckets
 * for ~9 iterations, and dropped the state each time). Each matrix draws its initial Q from a
 * generator of its own, so the result does not depend on the layout either.
 */
export class PowerSGDState {
  readonly rank: number;
  readonly startIter: number;
  readonly useErrorFeedback: boolean;
  readonly warmStart: boolean;
  readonly minCompressionRate: number;
  /** Completed iterations (counted on each last bucket). */
  iter = 0;
  private readonly buckets = new WeakMap<Float32Array, BucketState>();
  private readonly homes = new Map<number, Home>();
  private readonly generators = new Map<number, Generator>();
  private readonly seed: number;
  /** Buckets go one after the other: every rank issues the same collectives in the same order. */
  chain: Promise<unknown> = Promise.resolve();

  constructor(opts: PowerSGDOptions = {}) {
    checkOptionNames('PowerSGDState', opts, OPTIONS, (m) => new DDPUsageError(m));
    checkBooleanOptions('PowerSGDState', opts, ['useErrorFeedback', 'warmStart'], (m) => new DDPUsageError(m));
    checkNumberOptions('PowerSGDState', opts, ['minCompressionRate', 'seed'], (m) => new DDPUsageError(m));
    this.rank = opts.matrixApproximationRank ?? 1;
    this.startIter = opts.startPowerSGDIter ?? 10;
    // rank 0 made every compressed gradient zero (torch's too), NaN turned compression off, 1.5 a RangeError
    if (!(Number.isInteger(this.rank) && this.rank >= 1))
      throw new DDPUsageError(`PowerSGDState: matrixApproximationRank must be an integer ≥ 1, got ${this.rank}`);
    if (!(Number.isInteger(this.startIter) && this.startIter >= 0))
      throw new DDPUsageError(`PowerSGDState: startPowerSGDIter must be an integer ≥ 0, got ${this.startIter}`);
    this.useErrorFeedback = opts.useErrorFeedback ?? true;
    this.warmStart = opts.warmStart ?? true;
    this.minCompressionRate = opts.minCompressionRate ?? 2;
    this.seed = opts.seed ?? 0;
  }

  stateOf(bucket: GradBucket): BucketState {
    let state = this.buckets.get(bucket.buffer);
    const carried = new Set<number>();
    if (state === undefined) {
      state = this.layOut(bucket);
      this.buckets.set(bucket.buffer, state);
      this.carryOver(bucket, state, carried);
    }
    if (state.warm) this.renewQ(state);
    else for (const [x, qAt] of qOffsets(state)) if (!carried.has(x.param)) state.q.set(this.initialQ(x), qAt);
    state.warm = this.warmStart;
    return state;
  }

  private layOut(bucket: GradBucket): BucketState {
    const matrices: MatrixSlot[] = [];
    const plain: BucketState['plain'] = [];
    for (const s of bucket.parameters) {
      const n = s.shape[0] ?? 1;
      const m = s.size / n;
      const r = Math.min(this.rank, n, m);
      // compress only matrices minCompressionRate times larger than their factors (was: any larger at all,
      // so a 4 × 4 gradient went as a rank-1 guess where torch sends it exactly)
      if (s.shape.length >= 2 && this.minCompressionRate * (n + m) * r < n * m)
        matrices.push({ param: s.index, offset: s.offset, n, m, r });
      else plain.push({ offset: s.offset, size: s.size });
    }
    const plainSize = plain.reduce((t, x) => t + x.size, 0);
    const pSize = matrices.reduce((t, x) => t + x.n * x.r, 0);
    const qSize = matrices.reduce((t, x) => t + x.m * x.r, 0);
    return {
      matrices,
      plain,
      plainBuf: sharedArray(Float32Array, plainSize),
      p: sharedArray(Float32Array, pSize),
      q: sharedArray(Float32Array, qSize),
      error: null,
      warm: false,
    };
  }

  /**
   * A new bucket's parameters bring their error and (warm start) Q from their last bucket; adds
   * to `carried` the parameters whose Q came along.
   */
  private carryOver(bucket: GradBucket, state: BucketState, carried: Set<number>): void {
    const compressed = new Map([...qOffsets(state)].map(([x, qAt]) => [x.param, { x, qAt }]));
    for (const s of bucket.parameters) {
      const home = this.homes.get(s.index);
      const matrix = compressed.get(s.index);
      if (home?.state.error) {
        state.error ??= new Float32Array(bucket.buffer.length);
        state.error.set(home.state.error.subarray(home.offset, home.offset + s.size), s.offset);
      }
      if (home && this.warmStart && home.state.warm && home.qAt !== null && matrix) {
        state.q.set(home.state.q.subarray(home.qAt, home.qAt + matrix.x.m * matrix.x.r), matrix.qAt);
        carried.add(s.index);
      }
      this.homes.set(s.index, { state, offset: s.offset, qAt: matrix?.qAt ?? null });
    }
  }

  /**
   * Q of the last step orthonormalized (P = MQ keeps its span), each column that depends on the others
   * drawn afresh: after a gradient of rank < r (M = 0: a layer no rank used) they stayed zero under warm
   * start, the layer's gradient 0 for good, silently (torch: NaN). Q is the same on every rank, so are the draws.
   */
  private renewQ(state: BucketState): void {
    for (const [x, qAt] of qOffsets(state)) orthonormalizeColumns(state.q, qAt, x.m, x.r, () => this.initialQ(x));
  }

  /** A matrix's next random Q, from its own generator. */
  private initialQ(x: MatrixSlot): Float32Array {
    const g = this.generators.get(x.param) ?? new Generator(this.seed * 1_000_003 + x.param + 1);
    this.generators.set(x.param, g);
    return Float32Array.from(g.normal(x.m * x.r));
  }
}

/** Each matrix of a bucket state with the offset of its Q. */
function* qOffsets(state: BucketState): IterableIterator<[MatrixSlot, number]> {
  let qAt = 0;
  for (const x of state.matrices) {
    yield [x, qAt];
    qAt += x.m * x.r;
  }
}

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
