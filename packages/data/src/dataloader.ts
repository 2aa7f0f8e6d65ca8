import { tf } from '@ddp/tensor';
import { type Collated, defaultCollate, tensorsIn } from './collate.js';
import { type Dataset, isMapDataset } from './dataset.js';
import { booleanOption, checkDataOptions, checkIndex, DataArgumentError } from './errors.js';
import type { Generator } from './generator.js';
import { startPass } from './one-shot.js';
import { RandomSampler, type Sampler, SequentialSampler } from './sampler.js';

export interface DataLoaderOptions<T, B> {
  /** Samples per batch (default 1). */
  batchSize?: number;
  /** Reshuffle each epoch with a seeded generator (map-style datasets only). */
  shuffle?: boolean;
  /** Seed of the shuffling generator (default 0); the same seed gives the same orders everywhere. */
  seed?: number;
  /** Shuffling generator to use instead of one seeded with `seed`. */
  generator?: Generator;
  /** Where indices come from (e.g. a DistributedSampler); excludes `shuffle`. */
  sampler?: Sampler;
  /** Drop the last batch when it is smaller than batchSize. */
  dropLast?: boolean;
  /** Samples → batch (default: defaultCollate, to tf tensors). */
  collate?: (samples: T[]) => B;
  /** Batches prepared ahead of the one being consumed (default 1; 0 turns prefetch off). */
  prefetch?: number;
}

const DATA_LOADER_OPTIONS = ['batchSize', 'shuffle', 'seed', 'generator', 'sampler', 'dropLast', 'collate', 'prefetch'];

type Source<T> = Dataset<T> | AsyncIterable<T> | Iterable<T>;

function isIterable<T>(x: object): x is AsyncIterable<T> | Iterable<T> {
  return Symbol.asyncIterator in x || Symbol.iterator in x;
}

/**
 * One batch's samples. When a getItem fails (throws or rejects), the samples the others made are
 * disposed before the first failure is raised: their tensors had no other owner.
 */
async function readSamples<T>(dataset: Dataset<T>, indices: number[]): Promise<T[]> {
  for (const i of indices) checkIndex('DataLoader', i, dataset.length);
  const settled = await Promise.allSettled(indices.map(async (i) => dataset.getItem(i)));
  const failed = settled.find((r) => r.status === 'rejected');
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
  tf.dispose(settled.flatMap((r) => (r.status === 'fulfilled' ? tensorsIn(r.value) : [])));
  throw failed.reason;
}

/**
 * Batches a dataset (torch.utils.data.DataLoader), iterated with `for await`.
 *
 * Ownership: each yielded batch belongs to the caller, who disposes it (`tf.dispose(batch)`)
 * when done with it. Batches the loader prefetched but never handed out (the loop ended
 * early with break/return/throw, or the iterator was dropped: once collected) are disposed by
 * the loader.
 */
export class DataLoader<T, B = Collated<T>> implements AsyncIterable<B> {
  readonly batchSize: number;
  readonly dropLast: boolean;
  readonly prefetch: number;
  readonly sampler: Sampler | null;
  private readonly collate: (samples: T[]) => B;

  constructor(
    readonly dataset: Source<T>,
    opts: DataLoaderOptions<T, B> = {},
  ) {
    checkDataOptions('DataLoader', opts, DATA_LOADER_OPTIONS);
    // torch's batch_size=None (no batching) is not offered: null was taken as 1, silently (probe CA)
    if (opts.batchSize === null)
      throw new DataArgumentError(
        'batchSize null (no batching) is not offered: give a batch size, 1 for single samples',
      );
    this.batchSize = opts.batchSize ?? 1;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) {
      throw new DataArgumentError(`batchSize must be a positive integer, got ${opts.batchSize}`);
    }
    this.prefetch = opts.prefetch ?? 1;
    if (!Number.isInteger(this.prefetch) || this.prefetch < 0) {
      throw new DataArgumentError(`prefetch must be a non-negative integer, got ${opts.prefetch}`);
    }
    this.dropLast = booleanOption('DataLoader', 'dropLast', opts.dropLast, false);
    this.collate = opts.collate ?? (defaultCollate as unknown as (samples: T[]) => B);
    const shuffle = booleanOption('DataLoader', 'shuffle', opts.shuffle, false);
    if (opts.sampler && shuffle) {
      throw new DataArgumentError('sampler option is mutually exclusive with shuffle');
    }
    // a generator without shuffle is accepted, as torch's (one options object for train and
    // validation loaders); a seed, ours alone, only seeds the shuffle
    if (!shuffle && opts.seed !== undefined) {
      throw new DataArgumentError('seed seeds the shuffle: pass shuffle: true, or leave it out');
    }
    if (isMapDataset(dataset)) {
      // the dataset itself, so each epoch samples its current length (torch's len(dataset))
      this.sampler =
        opts.sampler ??
        (shuffle
          ? new RandomSampler(dataset, { seed: opts.seed, generator: opts.generator })
          : new SequentialSampler(dataset));
    } else {
      if (!isIterable(dataset)) {
        throw new DataArgumentError(
          'DataLoader: the dataset is neither map-style (length and getItem) nor (async) iterable',
        );
      }
      if (opts.sampler || shuffle) {
        throw new DataArgumentError('an iterable dataset takes no sampler and no shuffle: its stream sets the order');
      }
      this.sampler = null;
    }
  }

  /** Batches per epoch (map-style datasets only). */
  get length(): number {
    if (!this.sampler) throw new DataArgumentError('an iterable dataset has no length');
    const n = this.sampler.length;
    // a sampler without one (a Set, a generator) gave NaN batches (torch's len() raises)
    if (typeof n !== 'number') throw new DataArgumentError('DataLoader.length: its sampler has no length');
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  /**
   * Forwards to the sampler's setEpoch (DistributedSampler, RandomSampler: the epoch's order from
   * the seed and the epoch, so a resumed run draws it again); call it before each epoch.
   */
  setEpoch(epoch: number): void {
    this.sampler?.setEpoch?.(epoch);
  }

  /** Index batches of one epoch, from the sampler. */
  private *indexBatches(sampler: Sampler): IterableIterator<number[]> {
    let batch: number[] = [];
    for (const i of sampler) {
      batch.push(i);
      if (batch.length === this.batchSize) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0 && !this.dropLast) yield batch;
  }

  /** Sample batches of one epoch from a stream, read one batch at a time. */
  private async *streamBatches(stream: AsyncIterator<T> | Iterator<T>): AsyncGenerator<T[]> {
    for (;;) {
      const batch: T[] = [];
      try {
        while (batch.length < this.batchSize) {
          const r = await stream.next();
          if (r.done) break;
          batch.push(r.value);
        }
      } catch (error) {
        tf.dispose(tensorsIn(batch)); // the samples read before the stream failed
        throw error;
      }
      if (batch.length === this.batchSize || (batch.length > 0 && !this.dropLast)) yield batch;
      else tf.dispose(tensorsIn(batch)); // dropLast's partial batch
      if (batch.length < this.batchSize) return;
    }
  }

  [Symbol.asyncIterator](): AsyncGenerator<B> {
    const pass: Pass = { queue: [], stream: null };
    const batches = this.batches(pass);
    abandonedPasses.register(batches, pass, pass);
    return batches;
  }

  private async *batches(pass: Pass): AsyncGenerator<B> {
    const dataset = this.dataset;
    let next: () => Promise<IteratorResult<T[]>>;
    if (isMapDataset(dataset)) {
      const indices = this.indexBatches(this.sampler!);
      next = async () => {
        const r = indices.next();
        if (r.done) return { done: true, value: undefined };
        return { done: false, value: await readSamples(dataset, r.value) };
      };
    } else {
      startPass(dataset, 'DataLoader');
      const stream = Symbol.asyncIterator in dataset ? dataset[Symbol.asyncIterator]() : dataset[Symbol.iterator]();
      pass.stream = stream;
      const batches = this.streamBatches(stream);
      next = () => batches.next();
    }
    // In-flight batches, oldest first. Each starts after the previous one has read its samples,
    // so the order is the sampler's (or the stream's) whatever the I/O timing.
    const queue = pass.queue as Promise<IteratorResult<B>>[];
    let tail: Promise<unknown> = Promise.resolve();
    const start = (): void => {
      const p = tail
        .then(next)
        .then((r): IteratorResult<B> => (r.done ? r : { done: false, value: this.collate(r.value) }));
      p.catch(() => {}); // awaited later; keeps Node from reporting it as unhandled meanwhile
      tail = p;
      queue.push(p);
    };
    try {
      for (;;) {
        if (queue.length === 0) start();
        const r = await queue.shift()!;
        if (r.done) return;
        // Start the next batches before handing this one out, so they are prepared meanwhile.
        while (queue.length < this.prefetch) start();
        yield r.value;
      }
    } finally {
      abandonedPasses.unregister(pass);
      await endPass(pass);
    }
  }
}

/** What one iteration over a loader holds: its prefetched batches, and the dataset's iterator. */
interface Pass {
  queue: Promise<IteratorResult<unknown>>[];
  stream: AsyncIterator<unknown> | Iterator<unknown> | null;
}

/** Disposes the batches prefetched and never handed out, and ends the dataset's iterator. */
async function endPass({ queue, stream }: Pass): Promise<void> {
  for (const p of queue.splice(0)) {
    const r = await p.catch(() => null);
    if (r && !r.done) tf.dispose(r.value as tf.TensorContainer);
  }
  await stream?.return?.();
}

/**
 * An iterator dropped after next() without return() (torch's `next(iter(loader))`: read one
 * batch, let the iterator go) never runs its finally: its prefetched batches are disposed once
 * it is garbage-collected.
 */
const abandonedPasses = new FinalizationRegistry<Pass>((pass) => void endPass(pass).catch(() => {}));
