import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface Summary {
  checks: number;
  failures: string[];
}

describe('collectives across real processes', () => {
  // one host: all-reduces go through shared memory when @ddp/shm is built; once more over Unix sockets
  const worlds = [
    { worldSize: 2, transport: 'default' },
    { worldSize: 3, transport: 'default' },
    { worldSize: 4, transport: 'default' },
    { worldSize: 3, transport: 'uds' },
  ];
  for (const { worldSize, transport } of worlds) {
    it(`world of ${worldSize} (${transport} transport): every collective, op and dtype at sizes 0, 1, 7${worldSize >= 3 ? ' and 17 MiB' : ''}`, async () => {
      const env: Record<string, string> = transport === 'default' ? {} : { DDP_TRANSPORT: transport };
      const out = await spawnRanks({
        nprocs: worldSize,
        script: new URL('./test/collectives.child.ts', import.meta.url),
        args: worldSize >= 3 ? ['--large'] : [],
        timeoutMs: 200_000,
        env,
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) {
        const s = o.results[0] as Summary;
        expect(s.failures).toEqual([]);
        expect(s.checks).toBeGreaterThan(250);
      }
    }, 220_000);
  }
});
