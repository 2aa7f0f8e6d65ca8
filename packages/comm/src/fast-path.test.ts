import { explain } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { expectMismatchOnEveryRank, phase, runPhases } from './test/phases.js';

const run = (worldSize: number, mode: string) => runPhases('fast-path.child.ts', worldSize, mode, 60_000);

describe('small allReduces on the calling thread (shared memory)', () => {
  it.each([2, 4])(
    'world of %i: awaited ones complete before allReduce returns, with the right sums',
    async (n) => {
      const out = await run(n, 'sync');
      for (const o of out) {
        const r = phase(o, 'sync');
        expect(r?.name, explain(out)).toBe('ok');
        // peers late by more than the blocking budget finish on the event loop; most are not
        expect(r?.value as number, explain(out)).toBeGreaterThan(0);
      }
    },
    90_000,
  );

  it('fast and queued ops mixed in flight: complete in issue order, results equal on every rank', async () => {
    const out = await run(3, 'mixed');
    const values = out.map((o) => {
      const r = phase(o, 'mixed');
      expect(r?.name, explain(out)).toBe('ok');
      return r?.value;
    });
    expect(values[0]).toEqual({
      // issue order, and the second small allReduce summed the first one's result (3 × 3)
      burst: [0, 1, 2, 9],
      order: [0, 1, 2, 3, 4, 5, 6],
      // sum of rank·1000 + i over ranks 0..2, all-reduced twice (×3)
      small: [3 * 3000, 3 * (3000 + 3 * 1023)],
      large: 18,
      plain: 1.5,
      root: 42,
      // float16 1 + 1.000977 + 1.001953 = 3.00293, half-way between 3.00195 and 3.00391: to even
      half: [0x4202, 0x4202, 0x4202, 0x4202, 0x4202],
      ints: [100, 101, 102, 0, 0, 0, 0, 0, 0],
    });
    for (const v of values) expect(v).toEqual(values[0]);
  }, 90_000);

  it('a different small count on one rank: CollectiveMismatchError on every rank, then on the next call', async () => {
    const out = await run(3, 'mismatch');
    expectMismatchOnEveryRank(out);
  }, 60_000);

  it('an allReduce on one rank where the others broadcast: CollectiveMismatchError on every rank', async () => {
    // rank 0 in the one-step exchange, the others on the queue: each side sees the other's call
    const out = await run(3, 'other-op');
    for (const o of out) {
      const r = phase(o, 'collective');
      expect(r?.name, explain(out)).toBe('CollectiveMismatchError');
      expect(r?.message).toMatch(/allReduce\(float32, count 8, sum, seq 1\)/);
      expect(phase(o, 'after')?.name).toBe('CollectiveMismatchError');
    }
  }, 60_000);

  it('a rank that never arrives: CommTimeoutError naming it on every other rank', async () => {
    const out = await run(3, 'timeout');
    for (const o of out.filter((x) => x.rank !== 2)) {
      const r = phase(o, 'collective');
      expect(r?.name, explain(out)).toBe('CommTimeoutError');
      expect(r?.message).toMatch(/allReduce\(float32, count 16, sum, seq 1\)/);
      expect(r?.ranks).toEqual([2]);
    }
  }, 60_000);
});
