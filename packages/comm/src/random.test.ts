import { describe, expect, it } from 'vitest';
import { explain, runWorld } from './test/spawn-world.js';

describe('1000 random back-to-back collectives on the world and on subgroups', () => {
  for (const worldSize of [3, 4]) {
    it(`world of ${worldSize}: bit-exact with the local reference`, async () => {
      const out = await runWorld({
        worldSize,
        script: 'random.child.ts',
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
