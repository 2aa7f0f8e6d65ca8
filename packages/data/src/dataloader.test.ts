import { explain, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { DataLoader } from './dataloader.js';
import { ArrayDataset, Dataset, GeneratorDataset } from './dataset.js';
import { DistributedSampler } from './distributed-sampler.js';
import { DataArgumentError } from './errors.js';
import { Generator } from './generator.js';
import { ShardedIterableDataset } from './shard.js';

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Labels of every batch of one epoch, batches disposed as they go. */
async function epochLabels<T>(loader: DataLoader<T, tf.Tensor>): Promise<number[][]> {
  const out: number[][] = [];
  for await (const batch of loader) {
    out.push(Array.from(await batch.data()));
    batch.dispose();
  }
  return out;
}

describe('DataLoader', () => {
  // a config read from JSON passes TypeScript's checks with any key: these were ignored (batches of 1, no sharding)
  it('refuses options it does not know, with the camelCase name for a torch spelling', () => {
    const config = (json: string) => JSON.parse(json);
    const data = new ArrayDataset([1, 2, 3, 4]);
    expect(() => new DataLoader(data, config('{ "batch_size": 2, "shuffle": true }'))).toThrow(
      /DataLoader: unknown option "batch_size"; did you mean batchSize\?/,
    );
    expect(() => new DataLoader(data, config('{ "batchSize": 2, "num_workers": 4 }'))).toThrow(DataArgumentError);
    expect(() => new DistributedSampler(4, config('{ "num_replicas": 2, "rank": 1 }'))).toThrow(
      /DistributedSampler: unknown option "num_replicas"; did you mean numReplicas\?/,
    );
    expect(
      () => new ShardedIterableDataset([1, 2], config('{ "numShards": 2, "shardIndex": 0, "drop_last": true }')),
    ).toThrow(/ShardedIterableDataset: unknown option "drop_last"/);
  });

  it('batches in order, keeps or drops the last partial batch', async () => {
    const ds = new ArrayDataset(range(10));
    const keep = new DataLoader(ds, { batchSize: 4 });
    expect(keep.length).toBe(3);
    expect(await epochLabels(keep)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    const drop = new DataLoader(ds, { batchSize: 4, dropLast: true });
    expect(drop.length).toBe(2);
    expect(await epochLabels(drop)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ]);
  });

  it('collates structured samples to tensors of the right shapes and dtypes', async () => {
    const ds = new ArrayDataset(
      range(5).map((i) => ({ image: { data: new Float32Array(6).fill(i), shape: [2, 3] }, label: i % 2 })),
    );
    const shapes: number[][] = [];
    for await (const { image, label } of new DataLoader(ds, { batchSize: 2 })) {
      expect(image.dtype).toBe('float32');
      expect(label.dtype).toBe('int32');
      shapes.push(image.shape);
      tf.dispose([image, label]);
    }
    expect(shapes).toEqual([
      [2, 2, 3],
      [2, 2, 3],
      [1, 2, 3],
    ]);
  });

  it('seeded shuffle: a permutation per epoch, new each epoch, the same for the same seed', async () => {
    const ds = new ArrayDataset(range(20));
    const a = new DataLoader(ds, { batchSize: 5, shuffle: true, seed: 11 });
    const b = new DataLoader(ds, { batchSize: 5, shuffle: true, seed: 11 });
    const a0 = (await epochLabels(a)).flat();
    const a1 = (await epochLabels(a)).flat();
    expect([...a0].sort((x, y) => x - y)).toEqual(range(20));
    expect(a0).not.toEqual(range(20));
    expect(a1).not.toEqual(a0);
    expect((await epochLabels(b)).flat()).toEqual(a0);
    expect((await epochLabels(b)).flat()).toEqual(a1);
  });

  it('with a DistributedSampler: each rank loads its share; setEpoch reaches the sampler', async () => {
    const ds = new ArrayDataset(range(10));
    const loaders = [0, 1, 2].map(
      (rank) =>
        new DataLoader(ds, { batchSize: 2, sampler: new DistributedSampler(ds, { numReplicas: 3, rank, seed: 1 }) }),
    );
    const epoch0 = await Promise.all(loaders.map(async (l) => (await epochLabels(l)).flat()));
    for (const l of loaders) expect(l.length).toBe(2);
    expect(new Set(epoch0.flat()).size).toBe(10);
    for (const l of loaders) l.setEpoch(1);
    const epoch1 = await Promise.all(loaders.map(async (l) => (await epochLabels(l)).flat()));
    expect(epoch1).not.toEqual(epoch0);
    expect(new Set(epoch1.flat()).size).toBe(10);
  });

  it('prefetches the next batch while the current one is in use', async () => {
    const requested: number[] = [];
    class Slow extends Dataset<number> {
      get length() {
        return 8;
      }
      async getItem(i: number) {
        requested.push(i);
        await new Promise((r) => setTimeout(r, 1));
        return i;
      }
    }
    const seen: number[] = [];
    for await (const batch of new DataLoader(new Slow(), { batchSize: 2, prefetch: 1 })) {
      const first = (await batch.data())[0];
      // Let the prefetched batch's reads finish: they were started before this batch was handed out.
      await new Promise((r) => setTimeout(r, 20));
      seen.push(first, Math.max(...requested));
      batch.dispose();
    }
    // While batch k (first index 2k) is held, batch k+1 has already been read.
    expect(seen).toEqual([0, 3, 2, 5, 4, 7, 6, 7]);

    requested.length = 0;
    const noPrefetch = new DataLoader(new Slow(), { batchSize: 2, prefetch: 0 });
    for await (const batch of noPrefetch) {
      await new Promise((r) => setTimeout(r, 5));
      expect(Math.max(...requested)).toBe((await batch.data())[1]);
      batch.dispose();
    }
  });

  it('leaks no tensors: full epochs, and an early break disposes the prefetched batches', async () => {
    const ds = new ArrayDataset(range(12).map((i) => ({ x: Float32Array.of(i, i), y: i })));
    const loader = new DataLoader(ds, { batchSize: 3, prefetch: 2, shuffle: true });
    const before = tf.memory().numTensors;
    for (let epoch = 0; epoch < 3; epoch++) {
      for await (const batch of loader) tf.dispose(batch);
      expect(tf.memory().numTensors).toBe(before);
    }
    for await (const batch of loader) {
      tf.dispose(batch);
      break;
    }
    expect(tf.memory().numTensors).toBe(before);
    await expect(async () => {
      for await (const batch of loader) {
        tf.dispose(batch);
        throw new Error('training step failed');
      }
    }).rejects.toThrow('training step failed');
    expect(tf.memory().numTensors).toBe(before);
  });

  it("an iterator dropped after one next(), without return() (torch's next(iter(loader))), leaks nothing once collected", async () => {
    const [out] = await spawnRanks({
      nprocs: 1,
      script: new URL('./test/abandoned.child.ts', import.meta.url),
      nodeArgs: ['--expose-gc'],
      timeoutMs: 30_000,
    });
    expect(out?.results[0], explain([out as RankOutcome])).toEqual({ leaked: 0 });
  }, 40_000);

  it('a failing getItem surfaces at its batch and leaks nothing', async () => {
    class Broken extends Dataset<number> {
      get length() {
        return 6;
      }
      getItem(i: number) {
        if (i === 4) throw new Error('bad record 4');
        return i;
      }
    }
    const before = tf.memory().numTensors;
    const got: number[][] = [];
    await expect(async () => {
      for await (const b of new DataLoader(new Broken(), { batchSize: 2, prefetch: 2 })) {
        got.push(Array.from(await b.data()));
        b.dispose();
      }
    }).rejects.toThrow('bad record 4');
    expect(got).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('tensor samples: a failing getItem (sync or async), a failing stream and a dropped partial batch leak nothing', async () => {
    class Failing extends Dataset<tf.Tensor> {
      constructor(private readonly asynchronous: boolean) {
        super();
      }
      get length() {
        return 8;
      }
      getItem(i: number) {
        if (i !== 5) return this.asynchronous ? Promise.resolve(tf.fill([2], i)) : tf.fill([2], i);
        if (this.asynchronous) return Promise.reject(new Error('bad record 5'));
        throw new Error('bad record 5');
      }
    }
    const failingStream = new GeneratorDataset(function* () {
      for (let i = 0; i < 5; i++) yield tf.fill([2], i);
      throw new Error('bad record 5');
    });
    const before = tf.memory().numTensors;
    for (const source of [new Failing(false), new Failing(true), failingStream]) {
      await expect(async () => {
        for await (const batch of new DataLoader(source, { batchSize: 4 })) tf.dispose(batch);
      }).rejects.toThrow('bad record 5');
      expect(tf.memory().numTensors).toBe(before); // were 1, 3 and 1 tensors of the batch's other samples
    }
    const seven = new GeneratorDataset(function* () {
      for (let i = 0; i < 7; i++) yield tf.fill([2], i);
    });
    for (const source of [seven, new ShardedIterableDataset(seven, { numShards: 2, shardIndex: 0, dropLast: true })]) {
      for await (const batch of new DataLoader(source, { batchSize: 2, dropLast: true })) tf.dispose(batch);
      expect(tf.memory().numTensors).toBe(before); // the dropped partial batch, and the other shard's items
    }
  });

  it('an ArrayDataset of tensors serves every epoch (the first epoch disposed them: the second failed untyped)', async () => {
    const data = new ArrayDataset(range(4).map((i) => ({ x: tf.fill([2], i), y: i })));
    const before = tf.memory().numTensors;
    for (let epoch = 0; epoch < 2; epoch++) {
      const xs: number[] = [];
      for await (const { x, y } of new DataLoader(data, { batchSize: 2 })) {
        xs.push(...x.dataSync());
        tf.dispose([x, y]);
      }
      expect(xs).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it("samples the dataset's current length each epoch (items appended later were skipped), as torch reads len()", async () => {
    const items = [0, 1, 2];
    const data = new ArrayDataset(items);
    for (const shuffle of [false, true]) {
      const loader = new DataLoader(data, { batchSize: 10, shuffle });
      items.push(items.length, items.length + 1);
      expect(loader.length).toBe(1);
      expect((await epochLabels(loader)).flat().sort()).toEqual(range(items.length));
    }
  });

  it('takes any object with length and getItem, as torch takes any __len__/__getitem__; refuses what is neither', async () => {
    const plain = { length: 3, getItem: (i: number) => i * 10 };
    expect(await epochLabels(new DataLoader(plain, { batchSize: 2 }))).toEqual([[0, 10], [20]]);
    expect(() => new DataLoader({ length: 3 } as unknown as number[])).toThrow(
      /neither map-style \(length and getItem\) nor \(async\) iterable/,
    );
  });

  it('batches an iterable dataset, with dropLast and a custom collate', async () => {
    const stream = new GeneratorDataset(async function* () {
      for (let i = 0; i < 7; i++) yield i;
    });
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const collected: number[] = [];
    for await (const s of new DataLoader(stream, { batchSize: 3, collate: sum })) collected.push(s);
    expect(collected).toEqual([3, 12, 6]);
    collected.length = 0;
    for await (const s of new DataLoader(stream, { batchSize: 3, collate: sum, dropLast: true })) collected.push(s);
    expect(collected).toEqual([3, 12]);
    expect(() => new DataLoader(stream, { shuffle: true })).toThrow(DataArgumentError);
    expect(() => new DataLoader(stream).length).toThrow(DataArgumentError);
  });

  it('a one-shot stream (a generator object) gives one epoch; the next raises instead of having no batches', async () => {
    async function* numbers() {
      for (let i = 0; i < 6; i++) yield i;
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const epoch = async (source: ConstructorParameters<typeof DataLoader<number, number>>[0]) => {
      const out: number[] = [];
      for await (const s of new DataLoader(source, { batchSize: 2, collate: sum })) out.push(s);
      return out;
    };
    // before: the second epoch of each of these had no batches, silently
    const once = numbers();
    expect(await epoch(once)).toEqual([1, 5, 9]);
    await expect(epoch(once)).rejects.toThrow(/DataLoader: the stream is a one-shot iterator .* GeneratorDataset/);
    const sharded = new ShardedIterableDataset(numbers(), { numShards: 2, shardIndex: 0 });
    expect(await epoch(sharded)).toEqual([2, 4]);
    await expect(epoch(sharded)).rejects.toThrow(/ShardedIterableDataset: the stream is a one-shot iterator/);
    const made = numbers();
    const madeOnce = new GeneratorDataset(() => made);
    expect(await epoch(madeOnce)).toEqual([1, 5, 9]);
    await expect(epoch(madeOnce)).rejects.toThrow(DataArgumentError);
    // sources that start anew on each pass: every epoch the same
    for (const fresh of [
      new GeneratorDataset(numbers),
      range(6),
      new ShardedIterableDataset(range(6), { numShards: 1, shardIndex: 0 }),
    ]) {
      expect(await epoch(fresh)).toEqual([1, 5, 9]);
      expect(await epoch(fresh)).toEqual([1, 5, 9]);
    }
  });

  it('rejects bad options', () => {
    const ds = new ArrayDataset(range(3));
    expect(() => new DataLoader(ds, { batchSize: 0 })).toThrow(DataArgumentError);
    expect(() => new DataLoader(ds, { prefetch: -1 })).toThrow(DataArgumentError);
    expect(
      () => new DataLoader(ds, { shuffle: true, sampler: new DistributedSampler(3, { numReplicas: 1, rank: 0 }) }),
    ).toThrow(DataArgumentError);
    // were ignored: the order was sequential
    expect(() => new DataLoader(ds, { seed: 5 })).toThrow(/seed seeds the shuffle: pass shuffle: true/);
    expect(new DataLoader(ds, { shuffle: false, generator: new Generator(1) }).length).toBe(3); // as torch
    // probe CA: null was taken as 1; another object as generator failed at the first epoch, untyped; a sampler
    // without a length gave a NaN length
    expect(() => new DataLoader(ds, { batchSize: null as never })).toThrow(/batchSize null \(no batching\)/);
    expect(() => new DataLoader(ds, { shuffle: true, generator: {} as never })).toThrow(
      /RandomSampler: generator must be a Generator of @ddp\/data/,
    );
    expect(() => new DataLoader(ds, { sampler: new Set([0, 1]) as never }).length).toThrow(
      /DataLoader.length: its sampler has no length/,
    );
  });

  it('an index past the dataset is refused at its batch (was: undefined or NaN samples, a custom collate took them)', async () => {
    const ds = new ArrayDataset([10, 11, 12]);
    const loader = new DataLoader(ds, { batchSize: 2, sampler: [1, 2, 3, 0], collate: (x: number[]) => x });
    const batches: number[][] = [];
    await expect(
      (async () => {
        for await (const b of loader) batches.push(b);
      })(),
    ).rejects.toThrow(/DataLoader: index 3 is out of range for a dataset of 3 items/);
    expect(batches).toEqual([[11, 12]]);
    expect(() => ds.getItem(-1)).toThrow(/ArrayDataset: index -1 is out of range/);
    expect(() => ds.getItem(1.5)).toThrow(DataArgumentError);
  });

  it('boolean options given another type are refused (shuffle: "false" shuffled), as are string seeds', () => {
    const ds = new ArrayDataset(range(3));
    const notBoolean = (v: string) => v as unknown as boolean;
    expect(() => new DataLoader(ds, { shuffle: notBoolean('false') })).toThrow(
      /shuffle must be a boolean, got "false"/,
    );
    expect(() => new DataLoader(ds, { dropLast: notBoolean('true') })).toThrow(/dropLast must be a boolean/);
    const sampler = (opts: object) => new DistributedSampler(10, { numReplicas: 2, rank: 0, ...opts });
    expect(() => sampler({ shuffle: 'false' })).toThrow(/DistributedSampler: shuffle must be a boolean/);
    expect(() => sampler({ dropLast: 1 })).toThrow(/dropLast must be a boolean/);
    expect(() => sampler({ seed: '3' })).toThrow(/DistributedSampler: seed must be an integer in \[0, 2\^53\), got 3/);
    expect(Object.is(new DistributedSampler(2, { numReplicas: 5, rank: 0, dropLast: true }).length, 0)).toBe(true);
  });
});
