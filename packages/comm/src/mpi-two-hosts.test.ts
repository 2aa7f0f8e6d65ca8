import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explain, mpirunMissing, runMpirun } from '@ddp/launch/testing';
import { TwoHosts } from '@ddp/netns';
import { afterAll, describe, expect, it } from 'vitest';
import { mpiAddonMissing } from './test/mpi-addon.js';

/**
 * The 'mpi' backend across two "hosts": network namespaces joined by a veth pair, two ranks in
 * each. mpirun runs in host 0's namespace and starts host 1's daemon through an rsh agent that
 * enters host 1's namespace (TwoHosts.mpirun). Needs root.
 */
const hosts = new TwoHosts('m', '10.231.78');
const skipReason = mpirunMissing() ?? (await mpiAddonMissing()) ?? hosts.setUp();
if (skipReason) console.log(`mpi two-host test skipped: ${skipReason}`);

describe.skipIf(skipReason !== null)("the 'mpi' backend on two hosts (network namespaces + veth), 2 ranks each", () => {
  const dir = mkdtempSync(join(tmpdir(), 'ddp-mpi-hosts-'));
  afterAll(() => {
    hosts.tearDown();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes the collective suite, its traffic on the link between the hosts', async () => {
    const before = hosts.bytesSent(1);
    const out = await runMpirun({
      np: 4,
      script: new URL('./test/collectives.child.ts', import.meta.url),
      env: { DDP_COMM_BACKEND: 'mpi' },
      ...hosts.mpirun(dir, 2),
      timeoutMs: 90_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    for (const o of out) {
      expect((o.results[0] as { failures: string[] }).failures).toEqual([]);
      expect((o.results[0] as { checks: number }).checks).toBeGreaterThan(250);
    }
    // host 1's ranks sent their part across the link (about 250 kB for the suite)
    expect(hosts.bytesSent(1) - before).toBeGreaterThan(100_000);
  }, 100_000);
});
