import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { DataArgumentError, NoProcessGroupError } from './errors.js';
import { ShardedIterableDataset, type ShardOptions } from './shard.js';

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('ShardedIterableDataset', () => {
  it('splits a stream across ranks without duplicates (10 over 3, 7 over 4)', async () => {
    for (const [n, N] of [
      [10, 3],
      [7, 4],
      [8, 4],
    ] as const) {
      const shards = await Promise.all(
        range(N).map((shardIndex) => collect(new ShardedIterableDataset(range(n), { numShards: N, shardIndex }))),
      );
      expect(shards.flat().sort((a, b) => a - b)).toEqual(range(n));
      expect(shards[0]).toEqual(range(n).filter((i) => i % N === 0));
      const even = await Promise.all(
        range(N).map((shardIndex) =>
          collect(new ShardedIterableDataset(range(n), { numShards: N, shardIndex, dropLast: true })),
        ),
      );
      for (const s of even) expect(s).toHaveLength(Math.floor(n / N));
      expect(new Set(even.flat()).size).toBe(Math.floor(n / N) * N);
    }
  });

  it('ranks × workers: shard rank·W + worker', async () => {
    const worldSize = 2;
    const workers = 2;
    const all: number[] = [];
    for (let rank = 0; rank < worldSize; rank++) {
      for (let w = 0; w < workers; w++) {
        const stream = (async function* () {
          yield* range(11);
        })();
        all.push(
          ...(await collect(
            new ShardedIterableDataset(stream, { numShards: worldSize * workers, shardIndex: rank * workers + w }),
          )),
        );
      }
    }
    expect(all.sort((a, b) => a - b)).toEqual(range(11));
  });

  it('validates its shard and needs a process group when none is given', () => {
    expect(() => new ShardedIterableDataset([], { numShards: 2, shardIndex: 2 })).toThrow(DataArgumentError);
    expect(() => new ShardedIterableDataset([], { numShards: 0, shardIndex: 0 })).toThrow(DataArgumentError);
    expect(() => new ShardedIterableDataset([])).toThrow(NoProcessGroupError);
  });

  it("refuses dropLast 'false' (was: truthy, the last item dropped) and a map-style dataset (was: a TypeError later)", () => {
    const opts = { numShards: 2, shardIndex: 0, dropLast: 'false' } as unknown as ShardOptions;
    expect(() => new ShardedIterableDataset(range(5), opts)).toThrow(
      /ShardedIterableDataset: dropLast must be a boolean, got "false"/,
    );
    const mapStyle = { length: 3, getItem: (i: number) => i } as unknown as number[];
    expect(() => new ShardedIterableDataset(mapStyle, { numShards: 1, shardIndex: 0 })).toThrow(
      /the source must be an iterable stream .* split a map-style dataset with DistributedSampler/,
    );
  });

  // the other shards' items are disposed, but only their own tensors: arrays and plain objects
  // (a class instance an item refers to, such as a shared vocabulary, was disposed with it)
  it("disposes the other shards' tensors, not what their items merely refer to", async () => {
    class Vocabulary {
      constructor(readonly table: tf.Tensor) {}
    }
    const vocabulary = new Vocabulary(tf.ones([3]));
    const items = [0, 1, 2, 3].map((i) => ({ x: tf.fill([2], i), vocabulary }));
    const cyclic: Record<string, unknown> = { x: tf.zeros([1]) };
    cyclic.self = cyclic;
    const mine: unknown[] = [];
    for await (const item of new ShardedIterableDataset([...items, cyclic], {
      numShards: 2,
      shardIndex: 0,
      dropLast: true,
    }))
      mine.push(item);
    expect(mine).toHaveLength(2);
    expect(vocabulary.table.isDisposed).toBe(false);
    expect(items.map((item) => item.x.isDisposed)).toEqual([false, true, false, true]);
    expect((cyclic.x as tf.Tensor).isDisposed).toBe(true);
  });
});
