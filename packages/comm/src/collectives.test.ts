import { describe, expect, it } from 'vitest';
import { explain, runWorld } from './test/spawn-world.js';

interface Summary {
  checks: number;
  failures: string[];
}

describe('collectives across real processes', () => {
  for (const worldSize of [2, 3, 4]) {
    it(`world of ${worldSize}: every collective, op and dtype at sizes 0, 1, 7${worldSize === 4 ? ' and 17 MiB' : ''}`, async () => {
      const out = await runWorld({ worldSize, script: 'collectives.child.ts', args: worldSize >= 3 ? ['--large'] : [], timeoutMs: 200_000 });
      expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
      for (const o of out) {
        const s = o.results[0] as Summary;
        expect(s.failures).toEqual([]);
        expect(s.checks).toBeGreaterThan(250);
      }
    }, 220_000);
  }
});
