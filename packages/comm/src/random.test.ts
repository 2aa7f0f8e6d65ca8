import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

describe('1000 random back-to-back collectives on the world and on subgroups', () => {
  for (const worldSize of [3, 4]) {
    it(`world of ${worldSize}: bit-exact with the local reference`, async () => {
      const out = await spawnRanks({
        nprocs: worldSize,
        script: new URL('./test/random.child.ts', import.meta.url),
        args: ['1000', String(worldSize * 7919)],
        timeoutMs: 200_000,
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) {
        const s = o.results[0] as { checks: number; failures: string[] };
        expect(s.failures).toEqual([]);
        expect(s.checks).toBeGreaterThan(1000);
      }
    }, 220_000);
  }
});
