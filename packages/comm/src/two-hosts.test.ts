import { TwoHosts } from '@ddp/netns';
import { afterAll, describe, expect, it } from 'vitest';
import { explain, runWorld } from './test/spawn-world.js';

/**
 * Two "hosts": network namespaces joined by a veth pair, two ranks in each. Ranks in one
 * namespace use Unix sockets, across namespaces TCP. Needs root (ip netns); skips otherwise.
 */
const hosts = new TwoHosts('c', '10.231.77');
const skipReason = hosts.setUp();
if (skipReason) console.log(`two-host test skipped: ${skipReason}`);

describe.skipIf(skipReason !== null)('two hosts (network namespaces + veth), 2 ranks each', () => {
  afterAll(() => hosts.tearDown());

  it('passes the collective suite over TCP between the hosts', async () => {
    const out = await runWorld({
      worldSize: 4,
      script: 'collectives.child.ts',
      args: ['--large'],
      env: { MASTER_ADDR: hosts.addr[0] },
      wrap: (rank) => hosts.exec(rank < 2 ? 0 : 1),
      timeoutMs: 200_000,
    });
    expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
    for (const o of out) expect((o.results[0] as { failures: string[] }).failures).toEqual([]);
  }, 220_000);
});
