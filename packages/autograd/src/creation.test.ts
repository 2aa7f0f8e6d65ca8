import { describe, expect, it } from 'vitest';
import { manualSeed, rand, randn } from './index.js';

const values = (t: { dataSync(): ArrayLike<number>; dispose(): void }) => {
  const v = Array.from(t.dataSync());
  t.dispose();
  return v;
};

describe('seeded random tensors repeat, for every seed', () => {
  it('randn with seed 0 gives the same values each call (tfjs took 0 for no seed: each call, each rank differed)', () => {
    for (const seed of [0, -0, 1, 2 ** 32 - 1]) {
      const first = values(randn([6], { seed }));
      expect(values(randn([6], { seed }))).toEqual(first);
      expect(first.every(Number.isFinite)).toBe(true);
    }
    expect(values(randn([6], { seed: 0 }))).not.toEqual(values(randn([6], { seed: 1 })));
  });

  it('rand with seed 0 and manualSeed(0) streams repeat too', () => {
    expect(values(rand([6], { seed: 0 }))).toEqual(values(rand([6], { seed: 0 })));
    manualSeed(0);
    const first = [values(randn([4])), values(rand([4]))];
    manualSeed(0);
    expect([values(randn([4])), values(rand([4]))]).toEqual(first);
  });

  it('manualSeed refuses what nn.manualSeed refuses (was: 1.5 taken as 1, -1 as 2^32 − 1)', () => {
    for (const seed of [1.5, -1, '7', Number.NaN, 2 ** 53])
      expect(() => manualSeed(seed as number), String(seed)).toThrow(
        /manualSeed: seed must be an integer in \[0, 2\^53\)/,
      );
  });
});
