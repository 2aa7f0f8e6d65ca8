import { explain, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { TwoHosts } from '@ddp/netns';
import { afterAll, describe, expect, it } from 'vitest';
import { native } from './native.js';

/**
 * Two "hosts": network namespaces joined by a veth pair, two ranks in each. Ranks in one
 * namespace use Unix sockets (and shared memory), across namespaces TCP. Needs root (ip
 * netns); skips otherwise.
 */
const hosts = new TwoHosts('c', '10.231.77');
const skipReason = hosts.setUp();
if (skipReason) console.log(`two-host test skipped: ${skipReason}`);

interface Hierarchy {
  hashes: Record<string, string>;
  exact: Record<string, string>;
  wrong: string[];
  sent: Record<string, number>;
  overflowAvg: number[];
}

const resultsOf = (out: RankOutcome[]) => {
  expect(
    out.every((o) => o.code === 0),
    explain(out),
  ).toBe(true);
  return out.map((o) => o.results[0] as Hierarchy);
};

describe.skipIf(skipReason !== null)('two hosts (network namespaces + veth), 2 ranks each', () => {
  afterAll(() => hosts.tearDown());

  it('passes the collective suite over TCP between the hosts', async () => {
    const out = await spawnRanks({
      nprocs: 4,
      script: new URL('./test/collectives.child.ts', import.meta.url),
      args: ['--large'],
      env: { MASTER_ADDR: hosts.addr[0] },
      wrap: (rank) => hosts.exec(rank < 2 ? 0 : 1),
      timeoutMs: 200_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) expect((o.results[0] as { failures: string[] }).failures).toEqual([]);
  }, 220_000);

  it.runIf(native)(
    'all-reduces hierarchically: the one-host results bit for bit, and each host sends its data across once',
    async () => {
      const twoHosts = resultsOf(
        await spawnRanks({
          nprocs: 4,
          script: new URL('./test/hierarchy.child.ts', import.meta.url),
          env: { MASTER_ADDR: hosts.addr[0] },
          wrap: (rank) => hosts.exec(rank < 2 ? 0 : 1),
          timeoutMs: 200_000,
        }),
      );
      const oneHost = resultsOf(
        await spawnRanks({
          nprocs: 4,
          script: new URL('./test/hierarchy.child.ts', import.meta.url),
          timeoutMs: 200_000,
        }),
      );
      for (const r of [...twoHosts, ...oneHost]) {
        expect(r.wrong).toEqual([]);
        expect(r.exact).toEqual(oneHost[0]?.exact);
        expect(r.overflowAvg).toEqual([Math.fround(3e38)]);
      }
      // inexact sums: every rank of a run agrees bit for bit
      for (const run of [twoHosts, oneHost]) for (const r of run) expect(r.hashes).toEqual(run[0]?.hashes);
      // every socket byte of a hierarchical all-reduce crosses the link: per host, the ring of
      // 2 hosts moves 2(H−1)/H = 1× the data each way (a flat ring of 4 crosses with 1.5×)
      const bytes = { direct: 1000 * 4, ring: (1 << 18) * 4, pieces: (1.5 * (1 << 20) + 3) * 4 };
      for (const [path, size] of Object.entries(bytes)) {
        for (const host of [0, 1]) {
          const perHost = (twoHosts[2 * host]?.sent[path] ?? 0) + (twoHosts[2 * host + 1]?.sent[path] ?? 0);
          expect(perHost, `${path}, host ${host}`).toBeGreaterThanOrEqual(size);
          expect(perHost, `${path}, host ${host}`).toBeLessThan(size * 1.01 + 2048);
        }
        for (const r of twoHosts)
          expect(Math.abs((r.sent[path] ?? 0) - size / 2), path).toBeLessThan(size * 0.01 + 1024);
      }
    },
    420_000,
  );

  it.runIf(native)(
    "reduce-scatters and all-gathers hierarchically: the one-host results bit for bit, each host's share across once",
    async () => {
      const run = async (env: Record<string, string>, across: boolean) => {
        const where = across ? { wrap: (rank: number) => hosts.exec(rank < 2 ? 0 : 1) } : {};
        const out = await spawnRanks({
          nprocs: 4,
          script: new URL('./test/hierarchy-gather.child.ts', import.meta.url),
          env: { ...(across ? { MASTER_ADDR: hosts.addr[0] } : {}), ...env },
          timeoutMs: 200_000,
          ...where,
        });
        expect(
          out.every((o) => o.code === 0),
          explain(out),
        ).toBe(true);
        return out.map(
          (o) => o.results[0] as { exact: Record<string, string>; wrong: string[]; link: Record<string, number> },
        );
      };
      const [hier, flat, oneHost] = [
        await run({}, true),
        await run({ DDP_TRANSPORT: 'uds' }, true),
        await run({}, false),
      ];
      for (const r of [...hier, ...flat, ...oneHost]) {
        expect(r.wrong).toEqual([]);
        expect(r.exact).toEqual(oneHost[0]?.exact);
      }
      // per host (its interfaces count both of its ranks), float32: the hierarchy sends the other
      // host its ranks' chunks once (2 × chunk); a flat direct exchange sends each rank's chunk to
      // both ranks there (4 ×), a flat ring of 4 crosses with 3 chunks per host
      const chunk = { direct: 1000 * 4, ring: (1 << 17) * 4 };
      for (const [path, size] of Object.entries(chunk)) {
        for (const op of ['reduceScatter', 'allGather']) {
          for (const host of [0, 1]) {
            const sent = hier[2 * host]?.link[`${path}/${op}`] ?? 0;
            expect(sent, `${path} ${op}, host ${host}`).toBeGreaterThanOrEqual(2 * size);
            expect(sent, `${path} ${op}, host ${host}`).toBeLessThan(2 * size * 1.1 + 16_384);
            expect(flat[2 * host]?.link[`${path}/${op}`] ?? 0).toBeGreaterThan(3 * size);
          }
        }
      }
    },
    600_000,
  );

  it.runIf(native)(
    'on the hierarchical path, a mismatch, a rank that never arrives and a kill -9 are typed errors on every rank',
    async () => {
      const across = {
        env: { MASTER_ADDR: hosts.addr[0] },
        wrap: (rank: number) => hosts.exec(rank < 2 ? 0 : 1),
        timeoutMs: 60_000,
      };
      const phase = (o: RankOutcome, p: string) =>
        (o.results as { phase: string; name: string; ranks?: number[] }[]).find((r) => r.phase === p);
      const count = await spawnRanks({
        ...across,
        nprocs: 4,
        script: new URL('./test/faults.child.ts', import.meta.url),
        args: ['count'],
      });
      for (const o of count) expect(phase(o, 'collective')?.name, explain(count)).toBe('CollectiveMismatchError');
      const late = await spawnRanks({
        ...across,
        nprocs: 4,
        script: new URL('./test/faults.child.ts', import.meta.url),
        args: ['timeout'],
      });
      for (const o of late.slice(0, 3))
        expect(phase(o, 'collective'), explain(late)).toMatchObject({ name: 'CommTimeoutError', ranks: [3] });
      const started = new Set<number>();
      const children = new Map<number, import('node:child_process').ChildProcess>();
      const killed = await spawnRanks({
        ...across,
        nprocs: 4,
        script: new URL('./test/faults.child.ts', import.meta.url),
        args: ['kill'],
        onSpawn: (r, c) => children.set(r, c),
        onResult: (r, res) => {
          if ((res as { phase: string }).phase === 'started' && started.add(r).size === 4)
            setTimeout(() => children.get(3)?.kill('SIGKILL'), 300);
        },
      });
      for (const o of killed.slice(0, 3))
        expect(phase(o, 'loop'), explain(killed)).toMatchObject({ name: 'PeerLostError', ranks: [3] });
    },
    200_000,
  );
});
