import { explain } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { native } from './native.js';
import { expectMismatchOnEveryRank, phase, runPhases } from './test/phases.js';

const run = (worldSize: number, mode: string) => runPhases('shm-exchange.child.ts', worldSize, mode, 90_000);

describe.skipIf(!native)('small allReduces in one native exchange (shared memory)', () => {
  it.each([2, 4])(
    'world of %i: every dtype and op bit-identical to the two-step path, awaited and queued',
    async (n) => {
      const out = await run(n, 'bits');
      for (const o of out) expect(phase(o, 'bits'), explain(out)).toEqual({ phase: 'bits', name: 'ok', value: [] });
    },
    120_000,
  );

  it.each([
    ['op', /allReduce\(float32, count 64, max/],
    ['dtype', /allReduce\(int32, count 64/],
  ])(
    'another reduce %s on one rank: CollectiveMismatchError on every rank, then on the next call',
    async (mode, what) => {
      const out = await run(3, mode);
      expectMismatchOnEveryRank(out);
      // the rank that called it, and some peer, name the odd call
      expect(out.some((o) => what.test(phase(o, 'collective')?.message ?? ''))).toBe(true);
    },
    60_000,
  );
});
