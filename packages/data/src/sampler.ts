import { booleanOption, checkDataOptions, DataArgumentError } from './errors.js';
import { Generator } from './generator.js';

/** Yields dataset indices; `length` is how many one epoch yields. */
export interface Sampler extends Iterable<number> {
  readonly length: number;
  /** Samplers whose order depends on the epoch (DistributedSampler) implement this. */
  setEpoch?(epoch: number): void;
}

/** An epoch number, checked (setEpoch). */
export function checkEpoch(epoch: number): void {
  if (!Number.isSafeInteger(epoch) || epoch < 0) {
    throw new DataArgumentError(`epoch must be a non-negative integer, got ${epoch}`);
  }
}

/** Whether RandomSampler.setEpoch has said that a caller's generator sets the order (said once). */
let warnedOfGenerator = false;

/** What a sampler draws from: a dataset, read anew each epoch as torch's len(data_source), or a count. */
export type SamplerSource = { readonly length: number } | number;

export function checkLength(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new DataArgumentError(`${what} must be a non-negative integer, got ${n}`);
  }
}

/** The source's current length, checked: items appended to a dataset are sampled from the next epoch on. */
function sourceLength(source: SamplerSource, what: string): number {
  const n = typeof source === 'number' ? source : source.length;
  checkLength(n, `${what} length`);
  return n;
}

/** 0, 1, …, n-1. */
export class SequentialSampler implements Sampler {
  constructor(private readonly source: SamplerSource) {
    sourceLength(source, 'SequentialSampler');
  }
  get length(): number {
    return sourceLength(this.source, 'SequentialSampler');
  }
  *[Symbol.iterator](): Iterator<number> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield i;
  }
}

export interface RandomSamplerOptions {
  /** Draw with replacement (default false). */
  replacement?: boolean;
  /** Indices per epoch (default: the dataset's length); above it only with replacement or in repeated permutations. */
  numSamples?: number;
  /** Seed of a generator made for this sampler (default 0); excludes `generator`. */
  seed?: number;
  /** Generator to draw from, which advances from one epoch to the next. */
  generator?: Generator;
}

/**
 * Random indices each epoch, drawn from a seeded generator that advances from one epoch to the
 * next (torch's RandomSampler with a generator): the same seed gives the same sequence of orders
 * on every rank. Without replacement: a permutation of 0..n-1, or numSamples of them (whole
 * permutations, then part of one, as torch); with replacement: numSamples uniform draws.
 */
export class RandomSampler implements Sampler {
  readonly generator: Generator;
  readonly replacement: boolean;
  private readonly numSamples: number | undefined;
  /** The seed of the generator made for this sampler; null when it draws from the caller's. */
  private readonly seed: number | null;

  constructor(
    private readonly source: SamplerSource,
    opts: RandomSamplerOptions = {},
  ) {
    checkDataOptions('RandomSampler', opts, ['replacement', 'numSamples', 'seed', 'generator']);
    if (opts.seed !== undefined && opts.generator !== undefined) {
      throw new DataArgumentError('RandomSampler: give seed or generator, not both (the generator has its own seed)');
    }
    this.replacement = booleanOption('RandomSampler', 'replacement', opts.replacement, false);
    if (opts.numSamples !== undefined && (!Number.isSafeInteger(opts.numSamples) || opts.numSamples < 1)) {
      throw new DataArgumentError(`RandomSampler: numSamples must be a positive integer, got ${opts.numSamples}`);
    }
    this.numSamples = opts.numSamples;
    const given = opts.generator as Partial<Generator> | undefined;
    if (given !== undefined && !(typeof given.randperm === 'function' && typeof given.randint === 'function'))
      // another object ({}, a torch-style seed) failed at the first epoch with "randperm is not a function"
      throw new DataArgumentError('RandomSampler: generator must be a Generator of @ddp/data (randperm, randint)');
    this.seed = opts.generator ? null : (opts.seed ?? 0);
    this.generator = opts.generator ?? new Generator(this.seed ?? 0);
    sourceLength(source, 'RandomSampler');
  }

  get length(): number {
    return this.numSamples ?? sourceLength(this.source, 'RandomSampler');
  }

  /**
   * The next epoch's order from the seed and `epoch` alone (its generator re-seeded with seed +
   * epoch, as DistributedSampler's), so a run resumed at an epoch draws that epoch's order again
   * (before, setEpoch did nothing and a resumed run retrained epoch 0's order). A sampler drawing
   * from the caller's generator keeps drawing from it (generic loops call setEpoch on every
   * loader), and says once that its order follows that generator's state.
   */
  setEpoch(epoch: number): void {
    checkEpoch(epoch);
    if (this.seed !== null) {
      this.generator.manualSeed(this.seed + epoch);
      return;
    }
    if (warnedOfGenerator) return;
    warnedOfGenerator = true;
    process.emitWarning(
      'RandomSampler.setEpoch: this sampler draws from the generator it was given, whose state, not the epoch, ' +
        "sets the order; to resume, save and restore that generator's state (getState/setState), or give a seed",
      { code: 'DDP_SAMPLER_GENERATOR' },
    );
  }

  *[Symbol.iterator](): Iterator<number> {
    const n = sourceLength(this.source, 'RandomSampler');
    const count = this.length;
    // torch refuses an empty one too: a shuffled loader over it gave no batch, and nothing trained
    if (n === 0)
      throw new DataArgumentError(
        `RandomSampler: cannot draw ${count > 0 ? `${count} indices` : 'an epoch'} from an empty dataset`,
      );
    if (this.replacement) {
      for (let i = 0; i < count; i++) yield this.generator.randint(n);
      return;
    }
    for (let left = count; left > 0; left -= n) {
      const perm = this.generator.randperm(n);
      yield* left >= n ? perm : perm.subarray(0, left);
    }
  }
}
