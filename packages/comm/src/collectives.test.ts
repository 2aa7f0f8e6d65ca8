import { explain, runWorld, spawnRanks } from '@ddp/launch/testing';
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

// was: a Work has no then, so `await work` returned at once: the buffer still held this rank's own values
describe.each(['default', 'uds'])('a Work awaited as it is waits for the collective (%s transport)', (transport) => {
  it('await pg.allReduce(buf), broadcast, allGatherInto: the result is in the buffer right after the await', async () => {
    const env: Record<string, string> = transport === 'uds' ? { DDP_TRANSPORT: 'uds' } : {};
    const { results } = await runWorld<Record<string, number[]>>({
      script: new URL('./test/awaited-work.child.ts', import.meta.url),
      nprocs: 2,
      env,
    });
    for (const seen of results) for (const values of Object.values(seen)) expect(values).toEqual([3, 3, 7, 7, 1, 2]);
  }, 90_000);
});
