import { zeros } from '@ddp/autograd';
import { describe, expect, it } from 'vitest';
import { partitionParameters } from './partition.js';

describe('partitionParameters (sorted greedy)', () => {
  it('gives the largest parameters first to the least-loaded rank', () => {
    const [a, b, c, d, e] = [[10], [40], [30], [20], [5]].map((s) => zeros(s));
    const part = partitionParameters([[a, b, c, d, e]], 2);
    // 40 → r0, 30 → r1, 20 → r1 (30 < 40), 10 → r0 (40 < 50), 5 → r0 (50 = 50, lowest rank)
    expect(part.sizes).toEqual([55, 50]);
    expect(part.byRank[0][0]).toEqual([a, b, e]);
    expect(part.byRank[1][0]).toEqual([c, d]);
    for (const t of [a, b, c, d, e]) t.dispose();
  });

  it('carries loads across parameter groups and leaves a rank empty when there are too few parameters', () => {
    const [a, b] = [[8], [8]].map((s) => zeros(s));
    const part = partitionParameters([[a], [b]], 3);
    expect(part.sizes).toEqual([8, 8, 0]);
    expect(part.byRank[2]).toEqual([[], []]);
    expect(part.owner.get(b)).toBe(1);
    for (const t of [a, b]) t.dispose();
  });
});
