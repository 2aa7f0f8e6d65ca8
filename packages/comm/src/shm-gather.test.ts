import { explain } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { native } from './native.js';
import { expectMismatchOnEveryRank, phase, runPhases } from './test/phases.js';

const run = (n: number, mode: string) => runPhases('shm-gather.child.ts', n, mode, 150_000);

describe.skipIf(!native)('reduce-scatter and all-gather over one host’s shared memory', () => {
  it.each([2, 3, 4])(
    'world of %i: every dtype and op exact, multi-piece and uneven sizes, bit for bit as allReduce, no data on the sockets',
    async (n) => {
      const out = await run(n, 'values');
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) {
        const r = o.results[0] as { wrong: string[]; sent: number };
        expect(r.wrong, `rank ${o.rank}`).toEqual([]);
        // fingerprints and progress live in the segment: at most a heartbeat or two, never the data
        expect(r.sent, `rank ${o.rank}`).toBeLessThan(4096);
      }
    },
    180_000,
  );

  it('kill -9 of a rank during large reduce-scatters and all-gathers: PeerLostError naming it on every other rank', async () => {
    const out = await run(3, 'kill');
    for (const o of out.filter((x) => x.rank !== 1)) {
      expect(phase(o, 'loop')?.name, explain(out)).toBe('PeerLostError');
      expect(phase(o, 'loop')?.ranks).toEqual([1]);
    }
  }, 90_000);

  it('an all-gather on one rank where the others reduce-scatter: CollectiveMismatchError on every rank', async () => {
    const out = await run(3, 'mismatch');
    expectMismatchOnEveryRank(out);
  }, 60_000);

  it('a rank that never arrives: CommTimeoutError naming the reduce-scatter and that rank', async () => {
    const out = await run(3, 'timeout');
    for (const o of out.filter((x) => x.rank !== 2)) {
      const r = phase(o, 'collective');
      expect(r?.name, explain(out)).toBe('CommTimeoutError');
      expect(r?.message).toMatch(/reduceScatter\(float32/);
      expect(r?.ranks).toEqual([2]);
    }
  }, 60_000);
});
