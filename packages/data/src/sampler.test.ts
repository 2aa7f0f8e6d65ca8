import type { tf } from '@ddp/tensor';
import { describe, expect, it, vi } from 'vitest';
import { DataLoader } from './dataloader.js';
import { ArrayDataset } from './dataset.js';
import { DataArgumentError } from './errors.js';
import { Generator } from './generator.js';
import { RandomSampler, SequentialSampler } from './sampler.js';

const counts = (xs: Iterable<number>, n: number) => {
  const c = new Array(n).fill(0);
  for (const x of xs) c[x]++;
  return c;
};

describe('RandomSampler (torch semantics)', () => {
  it('without replacement: a permutation per epoch; numSamples takes whole permutations, then part of one', () => {
    const g = new Generator(3);
    expect(counts(new RandomSampler(5, { generator: g }), 5)).toEqual([1, 1, 1, 1, 1]);
    const more = new RandomSampler(5, { numSamples: 12, seed: 3 });
    expect(more.length).toBe(12);
    const drawn = [...more];
    expect(counts(drawn.slice(0, 5), 5)).toEqual([1, 1, 1, 1, 1]);
    expect(counts(drawn.slice(5, 10), 5)).toEqual([1, 1, 1, 1, 1]);
    expect(new Set(drawn.slice(10)).size).toBe(2);
    expect([...new RandomSampler(5, { numSamples: 3, seed: 3 })]).toHaveLength(3);
  });

  // probe AF: a shuffled DataLoader over an empty dataset gave no batch and trained nothing (torch refuses it)
  it('an empty dataset: refused when drawn, as torch refuses it, by a shuffling DataLoader too', async () => {
    expect(() => [...new RandomSampler(0)]).toThrow(/^RandomSampler: cannot draw an epoch from an empty dataset/);
    const empty = new ArrayDataset<number>([]);
    const batches = async (shuffle: boolean) => {
      const out: unknown[] = [];
      for await (const b of new DataLoader(empty, { batchSize: 2, shuffle })) out.push(b);
      return out;
    };
    await expect(batches(true)).rejects.toThrow(/from an empty dataset/);
    expect(await batches(false)).toEqual([]); // unshuffled: no batch, as torch
  });

  // were ignored: a plain permutation of length 5 came out
  it('with replacement: numSamples uniform draws', () => {
    const s = new RandomSampler(4, { replacement: true, numSamples: 4000, seed: 1 });
    expect(s.length).toBe(4000);
    for (const c of counts(s, 4)) expect(Math.abs(c - 1000)).toBeLessThan(150);
    expect([...new RandomSampler(4, { replacement: true, seed: 1 })]).toHaveLength(4);
  });

  it('refuses unknown, conflicting and bad options, and drawing from nothing', () => {
    const options = (json: string) => JSON.parse(json);
    expect(() => new RandomSampler(5, options('{ "num_samples": 12 }'))).toThrow(/unknown option "num_samples"/);
    expect(() => new RandomSampler(5, { seed: 3, generator: new Generator(1) })).toThrow(/seed or generator, not both/);
    expect(() => new RandomSampler(5, { numSamples: 0 })).toThrow(DataArgumentError);
    expect(() => new RandomSampler(5, options('{ "replacement": "yes" }'))).toThrow(DataArgumentError);
    expect(() => [...new RandomSampler(0, { numSamples: 2 })]).toThrow(/cannot draw 2 indices from an empty dataset/);
  });

  it('follows a dataset whose length changes between epochs', () => {
    const items = [1, 2];
    const sequential = new SequentialSampler(items);
    const random = new RandomSampler(items, { seed: 2 });
    items.push(3);
    expect([...sequential]).toEqual([0, 1, 2]);
    expect(counts(random, 3)).toEqual([1, 1, 1]);
  });
});

// before: setEpoch did nothing on a shuffling loader, so a run resumed at epoch 1 retrained epoch 0's order
describe('setEpoch on a shuffling sampler or loader', () => {
  const epochs = (set: (e: number) => void, orders: () => number[], from: number, to: number) =>
    Array.from({ length: to - from }, (_, i) => {
      set(from + i);
      return orders();
    });

  it('gives each epoch the order of an uninterrupted run, from a fresh sampler', () => {
    const make = () => new RandomSampler(6, { seed: 3 });
    const a = make();
    const uninterrupted = epochs(
      (e) => a.setEpoch(e),
      () => [...a],
      0,
      3,
    );
    const b = make();
    expect(
      epochs(
        (e) => b.setEpoch(e),
        () => [...b],
        1,
        3,
      ),
    ).toEqual(uninterrupted.slice(1));
    expect(uninterrupted[1]).not.toEqual(uninterrupted[0]);
  });

  it('through a DataLoader with shuffle and seed', async () => {
    const make = () => new DataLoader(new ArrayDataset([0, 1, 2, 3, 4, 5]), { batchSize: 6, shuffle: true, seed: 3 });
    const order = async (loader: DataLoader<number>) => {
      const out: number[] = [];
      for await (const batch of loader) {
        out.push(...(batch as unknown as tf.Tensor).dataSync());
        (batch as unknown as tf.Tensor).dispose();
      }
      return out;
    };
    const a = make();
    a.setEpoch(0);
    await order(a);
    a.setEpoch(1);
    const b = make();
    b.setEpoch(1);
    expect(await order(b)).toEqual(await order(a));
  });

  it("keeps drawing from the caller's generator, and says so once; refuses a bad epoch", () => {
    const warned = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const generator = new Generator(3);
    const sampler = new RandomSampler(6, { generator });
    const next = new Generator(3);
    next.randperm(6);
    sampler.setEpoch(0);
    [...sampler];
    sampler.setEpoch(1);
    expect([...sampler]).toEqual([...next.randperm(6)]);
    expect(warned).toHaveBeenCalledTimes(1);
    warned.mockRestore();
    expect(() => new RandomSampler(6).setEpoch(-1)).toThrow(DataArgumentError);
  });
});
