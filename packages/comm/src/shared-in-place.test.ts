import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

describe('collectives on the caller’s shared memory (no staging copy)', () => {
  for (const nprocs of [2, 3]) {
    it(`allGatherInto into shared memory and reduceScatter overwriting a shared input give exact results (${nprocs} ranks)`, async () => {
      const out = await spawnRanks({
        nprocs,
        script: new URL('./test/shared-in-place.child.ts', import.meta.url),
        timeoutMs: 60_000,
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) expect(o.results[0], `rank ${o.rank}`).toEqual([]);
    }, 90_000);
  }
});
