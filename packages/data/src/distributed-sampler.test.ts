import { describe, expect, it } from 'vitest';
import { DistributedSampler, distributedIndices, samplesPerReplica } from './distributed-sampler.js';
import { DataArgumentError, NoProcessGroupError } from './errors.js';

const ranks = (
  n: number,
  N: number,
  { epoch = 0, ...opts }: { shuffle?: boolean; seed?: number; dropLast?: boolean; epoch?: number } = {},
) =>
  Array.from({ length: N }, (_, rank) => {
    const s = new DistributedSampler(n, { numReplicas: N, rank, ...opts });
    s.setEpoch(epoch);
    return [...s];
  });

/** Count of each index over all ranks. */
function histogram(perRank: number[][], n: number): number[] {
  const h = new Array<number>(n).fill(0);
  for (const r of perRank) for (const i of r) h[i]++;
  return h;
}

describe('DistributedSampler: PyTorch algorithm on fixed permutations', () => {
  // Expected values worked through torch.utils.data.DistributedSampler.__iter__ by hand.
  it('10 over 3, no shuffle: pads with 0, 1', () => {
    expect(ranks(10, 3, { shuffle: false })).toEqual([
      [0, 3, 6, 9],
      [1, 4, 7, 0],
      [2, 5, 8, 1],
    ]);
  });
  it('10 over 3, no shuffle, dropLast: truncates to 9', () => {
    expect(ranks(10, 3, { shuffle: false, dropLast: true })).toEqual([
      [0, 3, 6],
      [1, 4, 7],
      [2, 5, 8],
    ]);
  });
  it('7 over 4, with and without dropLast', () => {
    expect(ranks(7, 4, { shuffle: false })).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 0],
    ]);
    expect(ranks(7, 4, { shuffle: false, dropLast: true })).toEqual([[0], [1], [2], [3]]);
  });
  it('padding longer than the dataset repeats it (2 over 5)', () => {
    // torch: indices += (indices * ceil(3/2))[:3] → [0,1,0,1,0]
    expect(ranks(2, 5, { shuffle: false })).toEqual([[0], [1], [0], [1], [0]]);
    expect(ranks(2, 5, { shuffle: false, dropLast: true })).toEqual([[], [], [], [], []]);
  });
  it('a fixed shuffled permutation', () => {
    const perm = [7, 2, 9, 0, 4, 8, 1, 6, 3, 5];
    // padded to 12: [...perm, 7, 2]; rank r takes r, r+3, r+6, r+9
    expect([0, 1, 2].map((r) => distributedIndices(perm, 3, r, false))).toEqual([
      [7, 0, 1, 5],
      [2, 4, 6, 7],
      [9, 8, 3, 2],
    ]);
    // truncated to 9: [7,2,9,0,4,8,1,6,3]
    expect([0, 1, 2].map((r) => distributedIndices(perm, 3, r, true))).toEqual([
      [7, 0, 1],
      [2, 4, 6],
      [9, 8, 3],
    ]);
    const perm7 = [3, 6, 0, 5, 1, 4, 2];
    expect([0, 1, 2, 3].map((r) => distributedIndices(perm7, 4, r, false))).toEqual([
      [3, 1],
      [6, 4],
      [0, 2],
      [5, 3],
    ]);
    expect([0, 1, 2, 3].map((r) => distributedIndices(perm7, 4, r, true))).toEqual([[3], [6], [0], [5]]);
  });
  it('lengths follow torch: ceil(n/N), or floor(n/N) with dropLast', () => {
    expect(samplesPerReplica(10, 3, false)).toBe(4);
    expect(samplesPerReplica(10, 3, true)).toBe(3);
    expect(samplesPerReplica(12, 3, true)).toBe(4);
    expect(samplesPerReplica(7, 4, true)).toBe(1);
    expect(new DistributedSampler(10, { numReplicas: 3, rank: 0 }).totalSize).toBe(12);
  });
});

describe('DistributedSampler: coverage, epochs, agreement', () => {
  for (const [n, N] of [
    [10, 3],
    [7, 4],
    [12, 4],
    [101, 8],
  ] as const) {
    it(`${n} over ${N}: union covers once plus the padding; every rank gets the same count`, () => {
      for (const epoch of [0, 1, 5]) {
        const perRank = ranks(n, N, { seed: 42, epoch });
        const perRankCount = Math.ceil(n / N);
        for (const r of perRank) expect(r).toHaveLength(perRankCount);
        const h = histogram(perRank, n);
        expect(h.every((c) => c >= 1)).toBe(true);
        // The padding is the first (total - n) indices of the epoch's order: each appears twice.
        const padding = perRankCount * N - n;
        expect(h.reduce((a, c) => a + c - 1, 0)).toBe(padding);
        const order = new DistributedSampler(n, { numReplicas: 1, rank: 0, seed: 42 });
        order.setEpoch(epoch);
        const padded = [...order].slice(0, padding).sort((a, b) => a - b);
        const twice = h.flatMap((c, i) => (c === 2 ? [i] : []));
        expect(twice).toEqual(padded);
      }
    });
    it(`${n} over ${N} with dropLast: disjoint, floor(n/N) each`, () => {
      const perRank = ranks(n, N, { seed: 3, dropLast: true, epoch: 2 });
      for (const r of perRank) expect(r).toHaveLength(Math.floor(n / N));
      const all = perRank.flat();
      expect(new Set(all).size).toBe(all.length);
      expect(all.length).toBe(Math.floor(n / N) * N);
    });
  }

  it('orders differ between epochs and agree across ranks for the same seed', () => {
    const a = new DistributedSampler(50, { numReplicas: 2, rank: 1, seed: 7 });
    const b = new DistributedSampler(50, { numReplicas: 2, rank: 1, seed: 7 });
    const e0 = [...a];
    a.setEpoch(1);
    const e1 = [...a];
    expect(e1).not.toEqual(e0);
    b.setEpoch(1);
    expect([...b]).toEqual(e1);
    a.setEpoch(0);
    expect([...a]).toEqual(e0);
    // Two ranks draw from the same permutation: their shares are disjoint halves of it.
    const other = new DistributedSampler(50, { numReplicas: 2, rank: 0, seed: 7 });
    other.setEpoch(1);
    expect(new Set([...other, ...e1]).size).toBe(50);
    // A different seed gives a different order.
    expect([...new DistributedSampler(50, { numReplicas: 2, rank: 1, seed: 8 })]).not.toEqual(e0);
  });

  it('rejects bad ranks and replica counts, and needs a group when they are missing', () => {
    expect(() => new DistributedSampler(10, { numReplicas: 3, rank: 3 })).toThrow(DataArgumentError);
    expect(() => new DistributedSampler(10, { numReplicas: 3, rank: -1 })).toThrow(DataArgumentError);
    expect(() => new DistributedSampler(10, { numReplicas: 0, rank: 0 })).toThrow(DataArgumentError);
    expect(() => new DistributedSampler(10)).toThrow(NoProcessGroupError);
    expect(() => new DistributedSampler(10, { numReplicas: 2 })).toThrow(NoProcessGroupError);
    // a negative seed was refused only at the first shuffled pass, and never without shuffle
    for (const shuffle of [true, false])
      expect(() => new DistributedSampler(6, { numReplicas: 2, rank: 0, seed: -1, shuffle })).toThrow(
        /DistributedSampler: seed must be an integer in \[0, 2\^53\), got -1/,
      );
  });

  it('takes the length of a dataset object', () => {
    expect(new DistributedSampler({ length: 9 }, { numReplicas: 2, rank: 0 }).length).toBe(5);
  });

  it('refuses a dataset that grew or shrank since the sampler was built (was: the old length, new items never drawn)', () => {
    const items = [1, 2, 3, 4];
    const s = new DistributedSampler(items, { numReplicas: 2, rank: 0, shuffle: false });
    expect([...s]).toEqual([0, 2]);
    items.push(5, 6);
    expect(() => [...s]).toThrow(/DistributedSampler: the dataset has 6 items, 4 when the sampler was built/);
  });
});
