import { tf } from '@ddp/tensor';
import { tensorsIn } from './collate.js';
import { rankAndSizeOrDefault } from './comm-defaults.js';
import { IterableDataset } from './dataset.js';
import { booleanOption, checkDataOptions, DataArgumentError } from './errors.js';
import { startPass } from './one-shot.js';

export interface ShardOptions {
  /** Number of shards (ranks × workers); defaults to the process group's world size. */
  numShards?: number;
  /** This shard's index in [0, numShards); defaults to the process group's rank. */
  shardIndex?: number;
  /**
   * Drop the final partial round so every shard yields the same count (floor(n/numShards)),
   * which DDP needs to keep ranks in step; otherwise shards may differ by one item.
   */
  dropLast?: boolean;
}

/**
 * Splits a stream round-robin: item i goes to shard i mod numShards, so the shards are
 * disjoint and together cover the stream (the stream must be the same on every rank).
 * For ranks with several loader workers, use numShards = worldSize·numWorkers and
 * shardIndex = rank·numWorkers + workerId.
 */
export class ShardedIterableDataset<T> extends IterableDataset<T> {
  readonly numShards: number;
  readonly shardIndex: number;
  readonly dropLast: boolean;

  constructor(
    private readonly source: AsyncIterable<T> | Iterable<T>,
    opts: ShardOptions = {},
  ) {
    super();
    // a map-style dataset (getItem) was accepted here and failed untyped at its first pass
    const iterable = (x: object) => Symbol.asyncIterator in x || Symbol.iterator in x;
    if (typeof source !== 'object' || source === null || !iterable(source)) {
      throw new DataArgumentError(
        'ShardedIterableDataset: the source must be an iterable stream (an IterableDataset, an array, a ' +
          'generator); split a map-style dataset with DistributedSampler',
      );
    }
    checkDataOptions('ShardedIterableDataset', opts, ['numShards', 'shardIndex', 'dropLast']);
    const { rank: shardIndex, size: numShards } = rankAndSizeOrDefault(
      { rank: opts.shardIndex, size: opts.numShards },
      'ShardedIterableDataset',
      { rank: 'shardIndex', size: 'numShards' },
    );
    if (!Number.isInteger(numShards) || numShards < 1) {
      throw new DataArgumentError(`numShards must be a positive integer, got ${numShards}`);
    }
    if (!Number.isInteger(shardIndex) || shardIndex < 0 || shardIndex >= numShards) {
      throw new DataArgumentError(`shardIndex ${shardIndex} is outside [0, ${numShards - 1}]`);
    }
    this.numShards = numShards;
    this.shardIndex = shardIndex;
    // a string ('false', from a config) was truthy, and the last partial round was dropped
    this.dropLast = booleanOption('ShardedIterableDataset', 'dropLast', opts.dropLast, false);
  }

  /**
   * The items of other shards, and one this shard does not yield (dropLast, or the loop left
   * early), are disposed: the stream made them for this process, and only its own are handed on.
   */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    startPass(this.source, 'ShardedIterableDataset');
    let position = 0;
    let mine: { item: T } | null = null;
    try {
      for await (const item of this.source) {
        if (position === this.shardIndex) mine = { item };
        else tf.dispose(tensorsIn(item));
        position++;
        if (position === this.numShards) {
          // A full round: every shard gets its item, so this one may yield.
          const { item: yours } = mine!;
          mine = null;
          position = 0;
          yield yours;
        }
      }
      if (mine && !this.dropLast) {
        const { item: last } = mine;
        mine = null;
        yield last;
      }
    } finally {
      if (mine) tf.dispose(tensorsIn(mine.item));
    }
  }
}
