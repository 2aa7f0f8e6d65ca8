import { describe, expect, it } from 'vitest';
import { DataArgumentError } from './errors.js';
import { Generator, type GeneratorState } from './generator.js';

describe('Generator', () => {
  it('same seed → same stream; different seeds differ', () => {
    const a = new Generator(123);
    const b = new Generator(123);
    const xs = Array.from({ length: 5 }, () => a.nextUint32());
    expect(Array.from({ length: 5 }, () => b.nextUint32())).toEqual(xs);
    expect(new Generator(124).nextUint32()).not.toBe(xs[0]);
    expect(new Generator(2 ** 40).nextUint32()).not.toBe(new Generator(0).nextUint32());
  });
  it('seeds above 2^32 have streams of their own; those below keep theirs', () => {
    // was: seeds folded into 32 bits, so 2^32 and 668265261 (and 2^32 of every 2^53) drew one order
    const first = (seed: number) => Array.from(new Generator(seed).randperm(8)).join();
    expect(first(2 ** 32)).not.toBe(first(668265261));
    const seeds = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 33, 2 ** 52, 2 ** 53 - 1, 1_732_000_000_000];
    const words = seeds.map((seed) => new Generator(seed).getState().join());
    expect(new Set(words).size).toBe(seeds.length);
    // the streams of seeds below 2^32 are the ones written before (xoshiro128** from splitmix32 of the seed)
    expect(new Generator(0).getState()).toEqual([2462723854, 1020716019, 454327756, 1275600319]);
    expect(new Generator(123).getState()).toEqual([1482537201, 2737842301, 2667502145, 3175280481]);
  });
  it('randperm is a permutation and roughly uniform', () => {
    const g = new Generator(1);
    const p = g.randperm(1000);
    expect([...p].sort((x, y) => x - y)).toEqual([...Array(1000).keys()]);
    // Position of element 0 over many draws of size 4: each of 4 places about 1/4 of the time.
    const counts = [0, 0, 0, 0];
    for (let t = 0; t < 4000; t++) counts[g.randperm(4).indexOf(0)]++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
  });
  it('state round-trips', () => {
    const g = new Generator(9);
    g.nextUint32();
    const s = g.getState();
    const x = g.nextUint32();
    expect(new Generator().setState(s).nextUint32()).toBe(x);
  });
  it('rejects bad seeds and bounds', () => {
    expect(() => new Generator(-1)).toThrow(DataArgumentError);
    expect(() => new Generator(1.5)).toThrow(DataArgumentError);
    expect(() => new Generator(0).randint(0)).toThrow(DataArgumentError);
  });
  it('setState refuses words that are not uint32 (2^32 was stored as 0: an all-zero state, the same order forever)', () => {
    for (const state of [
      [2 ** 32, 0, 0, 0],
      [-1, 1, 1, 1],
      [1.5, 1, 1, 1],
      [Number.NaN, 1, 1, 1],
      ['1', 1, 1, 1],
      [0, 0, 0, 0],
      [1, 2, 3],
    ]) {
      expect(() => new Generator(7).setState(state as unknown as GeneratorState), JSON.stringify(state)).toThrow(
        /Generator state must be four integers in \[0, 2\^32\)/,
      );
    }
    expect(new Generator(7).setState([2 ** 32 - 1, 0, 0, 0]).getState()).toEqual([2 ** 32 - 1, 0, 0, 0]);
  });
});
