import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explain, mpirunMissing, runMpirun } from '@ddp/launch/testing';
import { ip, TwoHosts } from '@ddp/netns';
import { afterAll, describe, expect, it } from 'vitest';
import { mpiAddonMissing } from './test/mpi-addon.js';

/**
 * The 'mpi' backend across two "hosts": network namespaces joined by a veth pair, two ranks in
 * each. mpirun runs in host 0's namespace and starts host 1's daemon through an rsh agent that
 * enters host 1's namespace (as ssh would log in). Open MPI's shared memory is off: both
 * namespaces share /dev/shm and this one hostname, so its segment names would collide (real
 * hosts do not share either); everything goes over TCP on the veth link. Needs root.
 */
const hosts = new TwoHosts('m', '10.231.78');
const skipReason = mpirunMissing() ?? (await mpiAddonMissing()) ?? hosts.setUp();
if (skipReason) console.log(`mpi two-host test skipped: ${skipReason}`);
const sentBy = (host: number) =>
  Number(/TX:.*\n\s*(\d+)/.exec(ip('-n', hosts.ns[host], '-s', 'link', 'show', hosts.veth[host]))?.[1]);

describe.skipIf(skipReason !== null)("the 'mpi' backend on two hosts (network namespaces + veth), 2 ranks each", () => {
  const dir = mkdtempSync(join(tmpdir(), 'ddp-mpi-hosts-'));
  afterAll(() => {
    hosts.tearDown();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes the collective suite, its traffic on the link between the hosts', async () => {
    const agent = join(dir, 'rsh-agent.sh');
    // called as: agent <host> <command…>; the only remote host is host 1
    writeFileSync(agent, `#!/bin/sh\nshift\nexec ip netns exec ${hosts.ns[1]} sh -c "$*"\n`);
    chmodSync(agent, 0o755);
    const subnet = `${hosts.addr[0].replace(/\.\d+$/, '')}.0/24`;
    const mpirunArgs = [
      '-H',
      `${hosts.addr[0]}:2,${hosts.addr[1]}:2`,
      '--mca',
      'plm_rsh_agent',
      agent,
      '--mca',
      'btl',
      'self,tcp',
    ];
    mpirunArgs.push('--mca', 'btl_tcp_if_include', subnet, '--mca', 'oob_tcp_if_include', subnet);
    const before = sentBy(1);
    const out = await runMpirun({
      np: 4,
      script: new URL('./test/collectives.child.ts', import.meta.url),
      env: { DDP_COMM_BACKEND: 'mpi' },
      mpirunArgs,
      wrap: hosts.exec(0),
      timeoutMs: 90_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    for (const o of out) {
      expect((o.results[0] as { failures: string[] }).failures).toEqual([]);
      expect((o.results[0] as { checks: number }).checks).toBeGreaterThan(250);
    }
    // host 1's ranks sent their part across the link (about 250 kB for the suite)
    expect(sentBy(1) - before).toBeGreaterThan(100_000);
  }, 100_000);
});
