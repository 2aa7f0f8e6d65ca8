import { rankAndSizeOrDefault } from './comm-defaults.js';
import { booleanOption, checkDataOptions, DataArgumentError } from './errors.js';
import { Generator } from './generator.js';
import { checkEpoch, checkLength, type Sampler } from './sampler.js';

export interface DistributedSamplerOptions {
  /** World size; defaults to the default process group's. */
  numReplicas?: number;
  /** This process's rank; defaults to the default process group's. */
  rank?: number;
  /** Permute the indices each epoch (default true). */
  shuffle?: boolean;
  /** Base seed; the permutation of epoch e is seeded with seed + e. Must agree on every rank. */
  seed?: number;
  /** Truncate to floor(n / numReplicas) samples per rank instead of padding (default false). */
  dropLast?: boolean;
}

/** Samples per rank: ceil(n/N), or floor(n/N) with dropLast (torch's formula). */
export function samplesPerReplica(n: number, numReplicas: number, dropLast: boolean): number {
  // max(0, …): fewer items than replicas gave −0
  if (dropLast && n % numReplicas !== 0) return Math.max(0, Math.ceil((n - numReplicas) / numReplicas));
  return Math.ceil(n / numReplicas);
}

/**
 * PyTorch's DistributedSampler.__iter__ after the permutation: pad `order` by repeating it
 * from the start up to total = samplesPerReplica·N (or truncate to total with dropLast), then
 * take positions rank, rank+N, rank+2N, … Exported so the algorithm can be tested on a fixed
 * permutation, independently of the generator.
 */
export function distributedIndices(
  order: ArrayLike<number>,
  numReplicas: number,
  rank: number,
  dropLast: boolean,
): number[] {
  checkReplicas(numReplicas, rank);
  const n = order.length;
  const perRank = samplesPerReplica(n, numReplicas, dropLast);
  const out: number[] = [];
  if (n === 0) return out;
  for (let k = 0; k < perRank; k++) {
    // Position in the padded list; padding repeats the list from its start, cyclically.
    out.push(order[(rank + k * numReplicas) % n]);
  }
  return out;
}

function checkReplicas(numReplicas: number, rank: number): void {
  if (!Number.isInteger(numReplicas) || numReplicas < 1) {
    throw new DataArgumentError(`numReplicas must be a positive integer, got ${numReplicas}`);
  }
  if (!Number.isInteger(rank) || rank < 0 || rank >= numReplicas) {
    throw new DataArgumentError(`Invalid rank ${rank}, rank should be in the interval [0, ${numReplicas - 1}]`);
  }
}

/**
 * Restricts each rank to its own share of a map-style dataset (torch's DistributedSampler):
 * every rank yields `length` = ceil(n/N) indices (floor(n/N) with dropLast), together
 * covering the dataset once plus padding taken from the start of the epoch's order.
 * Call setEpoch(e) before each epoch, on every rank, to get a new order.
 */
export class DistributedSampler implements Sampler {
  readonly numReplicas: number;
  readonly rank: number;
  readonly shuffle: boolean;
  readonly seed: number;
  readonly dropLast: boolean;
  readonly datasetLength: number;
  readonly length: number;
  /** Total indices over all ranks per epoch, padding included. */
  readonly totalSize: number;
  epoch = 0;
  private readonly dataset: { readonly length: number } | null;

  constructor(dataset: { readonly length: number } | number, opts: DistributedSamplerOptions = {}) {
    checkDataOptions('DistributedSampler', opts, ['numReplicas', 'rank', 'shuffle', 'seed', 'dropLast']);
    this.dataset = typeof dataset === 'number' ? null : dataset;
    this.datasetLength = typeof dataset === 'number' ? dataset : dataset.length;
    checkLength(this.datasetLength, 'DistributedSampler dataset length');
    const { rank, size: numReplicas } = rankAndSizeOrDefault(
      { rank: opts.rank, size: opts.numReplicas },
      'DistributedSampler',
      { rank: 'rank', size: 'numReplicas' },
    );
    checkReplicas(numReplicas, rank);
    this.numReplicas = numReplicas;
    this.rank = rank;
    this.shuffle = booleanOption('DistributedSampler', 'shuffle', opts.shuffle, true);
    this.dropLast = booleanOption('DistributedSampler', 'dropLast', opts.dropLast, false);
    this.seed = opts.seed ?? 0;
    // a string seed was concatenated with the epoch ('3' + 0 = '30'); a negative one was refused only
    // at the first shuffled pass (never without shuffle), by the generator
    if (!Number.isSafeInteger(this.seed) || this.seed < 0)
      throw new DataArgumentError(`DistributedSampler: seed must be an integer in [0, 2^53), got ${String(opts.seed)}`);
    this.length = samplesPerReplica(this.datasetLength, numReplicas, this.dropLast);
    this.totalSize = this.length * numReplicas;
  }

  setEpoch(epoch: number): void {
    checkEpoch(epoch);
    this.epoch = epoch;
  }

  /** This rank's indices for the current epoch. */
  indices(): number[] {
    const n = this.datasetLength;
    // its share was sized for n: items added since would never be drawn (torch's assertion fails)
    if (this.dataset !== null && this.dataset.length !== n) {
      throw new DataArgumentError(
        `DistributedSampler: the dataset has ${this.dataset.length} items, ${n} when the sampler was built; ` +
          'build a new sampler for it',
      );
    }
    let order: ArrayLike<number>;
    if (this.shuffle) order = new Generator(this.seed + this.epoch).randperm(n);
    else order = Int32Array.from({ length: n }, (_, i) => i);
    return distributedIndices(order, this.numReplicas, this.rank, this.dropLast);
  }

  [Symbol.iterator](): Iterator<number> {
    return this.indices()[Symbol.iterator]();
  }
}
