import { writeFileSync } from 'node:fs';
import { runWorld } from '@ddp/launch/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { childScript } from './child-script.js';
import { explainHosts, TwoHosts } from './netns.js';

/**
 * Two hosts (network namespaces + veth), 2 ranks each, one `ddp-run` per host: the
 * collective suite and a DDP run under a token-bucket bandwidth limit, and a link taken down mid-run.
 * Needs root; skips with a printed reason otherwise.
 */
const hosts = new TwoHosts();
const skipReason = hosts.setUp();
if (skipReason) console.log(`network-namespace tests skipped: ${skipReason}`);
const script = childScript('collectives.child.ts');

describe.skipIf(skipReason !== null)('two hosts joined by a veth pair (tc tbf, link down)', () => {
  afterAll(() => hosts.tearDown());

  it('the collective suite is bit-exact under a 40 Mbit/s token-bucket limit', { timeout: 120_000 }, async () => {
    hosts.limit('40mbit');
    const runs = await hosts.run(script, ['suite', '2'], { timeoutMs: 100_000 });
    expect(
      runs.map((r) => r.code),
      explainHosts(runs),
    ).toEqual([0, 0]);
    for (const r of runs)
      for (const res of r.out.last(4).filter(Boolean)) expect(res).toEqual({ failures: [], rounds: 2 });
    expect(runs.flatMap((r) => r.out.last(4).filter(Boolean))).toHaveLength(4);
    // the bucket really held traffic back
    expect(hosts.overlimits()).toBeGreaterThan(0);
  });

  it('20 DDP steps across the hosts under the limit end with the parameters of the same run on one host, bit for bit', {
    timeout: 330_000,
  }, async () => {
    const args = ['0', '20'];
    // over sockets, as across the hosts: one host's shared memory would sum in another order
    const local = await runWorld<Record<string, unknown>>({
      script: childScript('soak.child.ts'),
      nprocs: 4,
      args,
      timeoutMs: 120_000,
      env: { ...process.env, DDP_TRANSPORT: 'uds' },
    });
    const want = local.results.map((r) => r?.paramsSha256);
    expect(new Set(want).size).toBe(1);
    hosts.limit('40mbit');
    const across = async (env: Record<string, string>) => {
      const runs = await hosts.run(childScript('soak.child.ts'), args, { timeoutMs: 150_000, env });
      expect(
        runs.map((r) => r.code),
        explainHosts(runs),
      ).toEqual([0, 0]);
      return runs.flatMap((r) => r.out.last(4).filter(Boolean)).map((r) => r?.paramsSha256);
    };
    // sockets throughout, as on the one host
    expect(await across({ DDP_TRANSPORT: 'uds' })).toEqual([want[0], want[0], want[0], want[0]]);
    // the default across hosts, hierarchical (shared memory in each host) sums in its own order: the same bits on every
    // rank
    const hierarchical = await across({});
    expect(hierarchical).toHaveLength(4);
    expect(new Set(hierarchical).size).toBe(1);
  });

  it("torchrun's spellings on one host, Kubeflow's PET_* on the other, collectives over DDP_SOCKET_IFNAME's link", {
    timeout: 120_000,
  }, async () => {
    // rendezvous over the first link; the ranks' own connections over a second one, named by interface
    const dev = hosts.addLink('10.231.77');
    const before = [hosts.txBytes(0, dev[0]), hosts.txBytes(0, hosts.veth[0])];
    const runs = await hosts.run(script, ['suite', '1'], {
      timeoutMs: 100_000,
      launch: (host, masterAddr, port) => {
        if (host === 0) {
          const flags = ['--nnodes', '2', '--node_rank', '0', '--nproc_per_node', '2', '--rdzv_backend', 'c10d'];
          flags.push('--rdzv_endpoint', `${masterAddr}:${port}`, '--rdzv_id', 'kubeflow-tj');
          return { flags, env: { DDP_SOCKET_IFNAME: dev[0] } };
        }
        const pet = { PET_NNODES: '2', PET_NODE_RANK: '1', PET_NPROC_PER_NODE: '2', PET_MASTER_ADDR: masterAddr };
        return {
          flags: [],
          env: { ...pet, PET_MASTER_PORT: port, PET_RDZV_ID: 'kubeflow-tj', DDP_SOCKET_IFNAME: dev[1] },
        };
      },
    });
    expect(
      runs.map((r) => r.code),
      explainHosts(runs),
    ).toEqual([0, 0]);
    for (const r of runs)
      for (const res of r.out.last(4).filter(Boolean)) expect(res).toEqual({ failures: [], rounds: 1 });
    expect(runs.flatMap((r) => r.out.last(4).filter(Boolean))).toHaveLength(4);
    expect(runs[1].err.text).toContain('[ddp-run] from pet: --nnodes 2 (PET_NNODES)');
    // the suite's megabytes crossed the second link; the first carried the store's few kilobytes
    const sent = [hosts.txBytes(0, dev[0]) - before[0], hosts.txBytes(0, hosts.veth[0]) - before[1]];
    expect(sent[0], `bytes sent on ${dev[0]} vs ${hosts.veth[0]}`).toBeGreaterThan(10 * sent[1]);
  });

  it('a link taken down mid-run gives PeerLostError and a non-zero ddp-run exit on both hosts', {
    timeout: 120_000,
  }, async () => {
    const ready = new Set<string>();
    let downed = false;
    const runs = await hosts.run(script, ['loop', '--exit-code'], {
      timeoutMs: 90_000,
      env: { DDP_TIMEOUT_MS: '30000' },
      onResult: (host, rank, r) => {
        if (r.ready) ready.add(`${host}/${rank}`);
        if (ready.size === 4 && !downed) {
          downed = true;
          setTimeout(() => hosts.linkDown(1), 1000);
        }
      },
    });
    expect(downed).toBe(true);
    // what the user sees, for RELIABILITY.md
    const seen = runs.map((r, host) => ({
      host,
      exitCode: r.code,
      ranks: r.out.last(4).flatMap((x, rank) => (x && 'error' in x ? [`rank ${rank}: ${x.error}: ${x.message}`] : [])),
      launcher: r.err.text
        .split('\n')
        .filter((l) => l.startsWith('[ddp-run]'))
        .slice(0, 3),
    }));
    writeFileSync(new URL('../results/netns-link-down.json', import.meta.url), `${JSON.stringify(seen, null, 2)}\n`);
    expect(
      runs.map((r) => r.code),
      explainHosts(runs),
    ).toEqual([1, 1]);
    // on each host, the rank that failed first names the lost peer (PeerLostError)
    for (const r of runs) {
      const errors = r.out
        .last(4)
        .filter((x) => x && 'error' in x)
        .map((x) => x?.error);
      expect(errors, explainHosts(runs)).toContain('PeerLostError');
    }
  });
});
