import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { native } from './native.js';

type Sent = Record<string, { sent: number; ok: boolean }>;

describe('bytes on the wire (getWireStats)', () => {
  for (const worldSize of [2, 3]) {
    it(`world of ${worldSize}: float16/bfloat16 all-reduces send half the bytes of float32, with right results`, async () => {
      const out = await spawnRanks({
        nprocs: worldSize,
        script: new URL('./test/wire.child.ts', import.meta.url),
        timeoutMs: 100_000,
        env: { DDP_TRANSPORT: 'uds' },
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) {
        const r = o.results[0] as Sent;
        expect(
          Object.entries(r)
            .filter(([, v]) => !v.ok)
            .map(([k]) => k),
        ).toEqual([]);
        // the ring sends 2(N−1)/N of the payload, plus frame headers
        const payload = (1 << 18) * 4 * ((2 * (worldSize - 1)) / worldSize);
        expect(r['ring/float32/sum'].sent / payload).toBeGreaterThanOrEqual(1);
        expect(r['ring/float32/sum'].sent / payload).toBeLessThan(1.01);
        for (const path of ['direct', 'ring']) {
          for (const d of ['float16', 'bfloat16']) {
            for (const op of ['sum', 'avg', 'max']) {
              const ratio = r[`${path}/${d}/${op}`].sent / r[`${path}/float32/${op}`].sent;
              expect(ratio, `${path}/${d}/${op}`).toBeGreaterThan(0.49);
              expect(ratio, `${path}/${d}/${op}`).toBeLessThan(0.53);
            }
          }
        }
      }
    }, 120_000);
  }

  it.runIf(native)(
    'world of 3 on one host with @ddp/shm: all-reduces put no data on the sockets, with right results',
    async () => {
      const out = await spawnRanks({
        nprocs: 3,
        script: new URL('./test/wire.child.ts', import.meta.url),
        timeoutMs: 100_000,
      });
      expect(
        out.every((o) => o.code === 0),
        explain(out),
      ).toBe(true);
      for (const o of out) {
        const r = o.results[0] as Sent;
        expect(
          Object.entries(r)
            .filter(([, v]) => !v.ok)
            .map(([k]) => k),
        ).toEqual([]);
        // the barrier before each all-reduce and heartbeats still use the sockets: a few headers at most
        for (const [k, v] of Object.entries(r)) expect(v.sent, k).toBeLessThan(1024);
      }
    },
    120_000,
  );

  // probe BM: 64 MiB segments went out as frames the peer refused, naming a healthy rank as lost
  it('DDP_SEGMENT_BYTES above the frame limit: segments clamped to it, said once, the all-reduce right', async () => {
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('./test/segment.child.ts', import.meta.url),
      timeoutMs: 100_000,
      env: { DDP_TRANSPORT: 'uds', DDP_SEGMENT_BYTES: String(64 * 2 ** 20) },
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) {
      expect(o.results[0]).toEqual({ firstDiff: -1 });
      expect(o.stderr).toContain('DDP_SEGMENT_BYTES=67108864 exceeds the frame limit');
    }
  }, 120_000);

  // probe BP: a plain array's staging copy raised a bare RangeError; the op was not named
  it('arrays over 4 GiB an op would copy or move: InvalidArgumentError naming the op and the limit, on every rank', async () => {
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('./test/too-large.child.ts', import.meta.url),
      timeoutMs: 60_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) {
      const r = o.results[0] as Record<string, string>;
      expect(r.allReducePlain).toMatch(
        /^InvalidArgumentError: .*allReduce: an array of 4294967300 bytes; .* 2\^32 − 1 bytes/,
      );
      expect(r.broadcastShared).toMatch(/^InvalidArgumentError: .*broadcast: an array of 4294967300 bytes/);
    }
  }, 70_000);
});
