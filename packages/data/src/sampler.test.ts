import { describe, expect, it } from 'vitest';
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
    expect([...new RandomSampler(0)]).toEqual([]);
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
