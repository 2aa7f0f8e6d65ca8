import { type ProcessGroup, sharedArray } from '@ddp/comm';
import { Generator, type GeneratorState } from '@ddp/nn';
import { checkBooleanOptions, checkNumberOptions, checkOptionNames } from '@ddp/tensor';
import type { GradBucket } from './comm-hooks.js';
import { DDPUsageError } from './errors.js';
import { orthonormalizeColumns } from './orthonormalize.js';

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

export interface MatrixSlot {
  /** The parameter's index in DDP's list. */
  param: number;
  offset: number;
  n: number;
  m: number;
  r: number;
}

/** One bucket's layout (matrices compressed, other tensors all-reduced as they are) and buffers. */
export interface BucketState {
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
  size: number;
  qAt: number | null;
  qSize: number;
}

/** One parameter's saved state: its error feedback, warm-start Q and Q generator, each if it had one. */
export interface SavedPowerSGDParameter {
  error?: Float32Array;
  q?: Float32Array;
  generator?: GeneratorState;
}

/** The options that shape the state; a state is loaded only into one made with the same. */
const SHAPING = ['matrixApproximationRank', 'useErrorFeedback', 'warmStart', 'minCompressionRate'] as const;

/** What stateDict gives and loadStateDict takes: one rank's state (the error feedback is that rank's own). */
export interface PowerSGDStateDict {
  iter: number;
  /** The group rank and size that made it; null before its first compression. */
  rank: number | null;
  worldSize: number | null;
  options: Record<(typeof SHAPING)[number], number | boolean>;
  /** By parameter index in DDP's list. */
  parameters: Map<number, SavedPowerSGDParameter>;
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
  /** Whether loadStateDict gave it a saved state (a resumed run's, even of iteration 0). */
  restored = false;
  private readonly buckets = new WeakMap<Float32Array, BucketState>();
  private readonly homes = new Map<number, Home>();
  private readonly generators = new Map<number, Generator>();
  /** From loadStateDict: each parameter's state until its first bucket takes it, and who saved it. */
  private loaded = new Map<number, SavedPowerSGDParameter>();
  private savedWorld: { rank: number; size: number } | null = null;
  private world: { rank: number; size: number } | null = null;
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

  /**
   * The bucket's state, its Q ready: last step's orthonormalized (P = MQ keeps its span), each column
   * that depends on the others drawn afresh (after a gradient of rank < r, M = 0 for a layer no rank used,
   * they stayed zero under warm start, the layer's gradient 0 for good, silently; torch: NaN). Q is the
   * same on every rank, so are the draws. Without warm start, or new, a random Q.
   */
  stateOf(bucket: GradBucket): BucketState {
    this.checkWorld(bucket.processGroup);
    let state = this.buckets.get(bucket.buffer);
    const carried = new Set<number>();
    if (state === undefined) {
      state = this.layOut(bucket);
      this.buckets.set(bucket.buffer, state);
      this.carryOver(bucket, state, carried);
    }
    // a carried Q is renewed as it would have been in its old bucket, so a resumed run matches an uninterrupted one
    for (const [x, qAt] of qOffsets(state))
      if (state.warm || carried.has(x.param)) orthonormalizeColumns(state.q, qAt, x.m, x.r, () => this.initialQ(x));
      else state.q.set(this.initialQ(x), qAt);
    state.warm = this.warmStart;
    return state;
  }

  /**
   * This rank's state, for a checkpoint (torch pickles its PowerSGDState per rank): the iteration,
   * each parameter's error feedback and warm-start Q, and where its Q generator stands.
   */
  stateDict(): PowerSGDStateDict {
    const parameters = new Map(this.loaded);
    for (const [index, { state, offset, size, qAt, qSize }] of this.homes)
      parameters.set(index, {
        error: state.error?.slice(offset, offset + size),
        q: state.warm && qAt !== null ? state.q.slice(qAt, qAt + qSize) : undefined,
      });
    for (const [index, g] of this.generators)
      parameters.set(index, { ...parameters.get(index), generator: g.getState() });
    const options = Object.fromEntries(SHAPING.map((k) => [k, this.optionValue(k)])) as PowerSGDStateDict['options'];
    const world = this.world ?? this.savedWorld; // saved again before its first compression: still the loaded one's
    return { iter: this.iter, rank: world?.rank ?? null, worldSize: world?.size ?? null, options, parameters };
  }

  /** Takes a state stateDict gave (this rank's own) before the first backward; errors name what differs. */
  loadStateDict(saved: PowerSGDStateDict): void {
    if (this.iter > 0 || this.homes.size > 0)
      throw new DDPUsageError('PowerSGDState.loadStateDict: load it before the first backward that uses this state');
    for (const k of SHAPING)
      if (saved.options[k] !== this.optionValue(k))
        throw new DDPUsageError(
          `PowerSGDState.loadStateDict: the state was saved with ${k} ${saved.options[k]}, this one has ` +
            `${this.optionValue(k)}: make the PowerSGDState with the saved options`,
        );
    this.iter = saved.iter;
    this.restored = true;
    this.savedWorld =
      saved.rank === null || saved.worldSize === null ? null : { rank: saved.rank, size: saved.worldSize };
    this.loaded = new Map(saved.parameters);
    for (const [index, { generator }] of saved.parameters)
      if (generator) this.generators.set(index, new Generator().setState(generator));
  }

  private optionValue(k: (typeof SHAPING)[number]): number | boolean {
    return k === 'matrixApproximationRank' ? this.rank : this[k];
  }

  /** The error feedback is per rank: a loaded state serves only the rank and world size that saved it. */
  private checkWorld(group: ProcessGroup): void {
    this.world = { rank: group.rank, size: group.size };
    const saved = this.savedWorld;
    if (saved === null || (saved.rank === group.rank && saved.size === group.size)) return;
    throw new DDPUsageError(
      `rank ${group.rank}: PowerSGD state loaded from rank ${saved.rank} of ${saved.size}, this is rank ` +
        `${group.rank} of ${group.size}: load each rank's own, ` +
        'or start a fresh PowerSGDState (compression starts over)',
    );
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
      const matrix = compressed.get(s.index);
      const qSize = matrix ? matrix.x.m * matrix.x.r : 0;
      const { error, q } = this.takeCarried(s.index, s.size, qSize);
      if (error) {
        state.error ??= new Float32Array(bucket.buffer.length);
        state.error.set(error, s.offset);
      }
      if (q && this.warmStart && matrix) {
        state.q.set(q, matrix.qAt);
        carried.add(s.index);
      }
      this.homes.set(s.index, { state, offset: s.offset, size: s.size, qAt: matrix?.qAt ?? null, qSize });
    }
  }

  /** A parameter's error and warm Q from its last bucket, or from a loaded state (checked against its sizes). */
  private takeCarried(index: number, size: number, qSize: number): SavedPowerSGDParameter {
    const home = this.homes.get(index);
    if (home) {
      const { state, offset, qAt } = home;
      const q = state.warm && qAt !== null ? state.q.subarray(qAt, qAt + home.qSize) : undefined;
      return { error: state.error?.subarray(offset, offset + size), q };
    }
    const saved = this.loaded.get(index);
    this.loaded.delete(index);
    if (saved === undefined) return {};
    if ((saved.error && saved.error.length !== size) || (saved.q && saved.q.length !== qSize))
      throw new DDPUsageError(
        `PowerSGD state loaded for parameter ${index} holds ${saved.error?.length ?? 0} error and ` +
          `${saved.q?.length ?? 0} Q values, its gradient needs ${size} and ${qSize}: ` +
          'the state was saved for another model',
      );
    return saved;
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
