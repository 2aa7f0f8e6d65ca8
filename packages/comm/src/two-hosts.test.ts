import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { explain, runWorld } from './test/spawn-world.js';

/**
 * Two "hosts": network namespaces joined by a veth pair, two ranks in each. Ranks in one
 * namespace use Unix sockets, across namespaces TCP. Needs root (ip netns); skips otherwise.
 */
const tag = randomBytes(3).toString('hex');
const ns = [`ddp-a-${tag}`, `ddp-b-${tag}`];
const veth = [`dv${tag}a`, `dv${tag}b`];
const addr = ['10.231.77.1', '10.231.77.2'];

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'pipe' });
}

function setUp(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  try {
    for (const n of ns) ip('netns', 'add', n);
    ip('link', 'add', veth[0] as string, 'type', 'veth', 'peer', 'name', veth[1] as string);
    ns.forEach((n, i) => {
      ip('link', 'set', veth[i] as string, 'netns', n);
      ip('-n', n, 'addr', 'add', `${addr[i]}/24`, 'dev', veth[i] as string);
      ip('-n', n, 'link', 'set', veth[i] as string, 'up');
      ip('-n', n, 'link', 'set', 'lo', 'up');
    });
    return null;
  } catch (e) {
    return `cannot create network namespaces: ${(e as Error).message.split('\n')[0]}`;
  }
}

function tearDown(): void {
  for (const n of ns) {
    try {
      ip('netns', 'del', n);
    } catch {}
  }
}

const skipReason = setUp();
if (skipReason) {
  console.log(`two-host test skipped: ${skipReason}`);
  tearDown();
}

describe.skipIf(skipReason !== null)('two hosts (network namespaces + veth), 2 ranks each', () => {
  afterAll(tearDown);

  it('passes the collective suite over TCP between the hosts', async () => {
    const out = await runWorld({
      worldSize: 4,
      script: 'collectives.child.ts',
      args: ['--large'],
      env: { MASTER_ADDR: addr[0] as string },
      wrap: (rank) => ['ip', 'netns', 'exec', ns[rank < 2 ? 0 : 1] as string],
      timeoutMs: 200_000,
    });
    expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
    for (const o of out) expect((o.results[0] as { failures: string[] }).failures).toEqual([]);
  }, 220_000);
});
