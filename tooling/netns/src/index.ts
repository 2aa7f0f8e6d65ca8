import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Several "hosts" on one machine: two network namespaces joined by a veth pair, for tests
 * and benchmarks that need traffic to cross a real (shapeable) link. Ranks on different
 * namespaces see different host ids and talk TCP. Needs root and `ip`; `tc` for limits
 * (tbf only: this kernel has no netem).
 */
export function ip(...args: string[]): string {
  return execFileSync('ip', args, { stdio: 'pipe' }).toString();
}

function tc(...args: string[]): string {
  return execFileSync('tc', args, { stdio: 'pipe' }).toString();
}

export class TwoHosts {
  readonly tag = randomBytes(3).toString('hex');
  readonly ns: [string, string];
  readonly veth: [string, string];
  readonly addr: [string, string];

  /** `name` tells the namespaces of concurrent users apart; `subnet` is a free /24's first three octets. */
  constructor(name: string, subnet: string) {
    this.ns = [`ddp-${name}a-${this.tag}`, `ddp-${name}b-${this.tag}`];
    this.veth = [`${name.slice(0, 3)}${this.tag}a`, `${name.slice(0, 3)}${this.tag}b`];
    this.addr = [`${subnet}.1`, `${subnet}.2`];
  }

  /** Creates both namespaces and the link; returns why it cannot (not root, no ip netns), or null. */
  setUp(): string | null {
    if (process.getuid?.() !== 0) return 'not root';
    try {
      for (const n of this.ns) ip('netns', 'add', n);
      ip('link', 'add', this.veth[0], 'type', 'veth', 'peer', 'name', this.veth[1]);
      this.ns.forEach((n, i) => {
        ip('link', 'set', this.veth[i], 'netns', n);
        ip('-n', n, 'addr', 'add', `${this.addr[i]}/24`, 'dev', this.veth[i]);
        ip('-n', n, 'link', 'set', this.veth[i], 'up');
        ip('-n', n, 'link', 'set', 'lo', 'up');
      });
      return null;
    } catch (e) {
      this.tearDown();
      return `cannot create network namespaces: ${(e as Error).message.split('\n')[0]}`;
    }
  }

  /** The command prefix that runs a program on `host`. */
  exec(host: number): string[] {
    return ['ip', 'netns', 'exec', this.ns[host]];
  }

  /**
   * How to run `mpirun` with `perHost` ranks on each host: started in host 0, it reaches host 1's
   * daemon through an rsh agent (written into `dir`) that enters host 1's namespace, as ssh
   * would log in. Open MPI's shared memory is off: both namespaces share /dev/shm and one
   * hostname, so its segment names would collide (real hosts share neither); all traffic is
   * TCP on the veth link.
   */
  mpirun(dir: string, perHost: number): { wrap: string[]; mpirunArgs: string[] } {
    const agent = join(dir, 'rsh-agent.sh');
    // called as: agent <host> <command…>; the only remote host is host 1
    writeFileSync(agent, `#!/bin/sh\nshift\nexec ip netns exec ${this.ns[1]} sh -c "$*"\n`);
    chmodSync(agent, 0o755);
    const subnet = `${this.addr[0].replace(/\.\d+$/, '')}.0/24`;
    const mca = { plm_rsh_agent: agent, btl: 'self,tcp', btl_tcp_if_include: subnet, oob_tcp_if_include: subnet };
    return {
      wrap: this.exec(0),
      mpirunArgs: [
        '-H',
        `${this.addr[0]}:${perHost},${this.addr[1]}:${perHost}`,
        ...Object.entries(mca).flatMap(([k, v]) => ['--mca', k, v]),
      ],
    };
  }

  /** Bytes `host` has sent on its end of the link so far (the kernel's counter). */
  bytesSent(host: number): number {
    return Number(/TX:.*\n\s*(\d+)/.exec(ip('-n', this.ns[host], '-s', 'link', 'show', this.veth[host]))?.[1]);
  }

  /** Token-bucket limit (e.g. '40mbit') on both ends of the link; fast rates need a burst of about rate / 250 Hz. */
  limit(rate: string, burst = '32kbit'): void {
    for (const [i, n] of this.ns.entries())
      tc(
        '-n',
        n,
        'qdisc',
        'replace',
        'dev',
        this.veth[i],
        'root',
        'tbf',
        'rate',
        rate,
        'burst',
        burst,
        'latency',
        '400ms',
      );
  }

  /** Packets the token bucket held back (over its rate), summed over both ends. */
  overlimits(): number {
    return this.ns.reduce(
      (sum, n, i) =>
        sum + Number(/overlimits (\d+)/.exec(tc('-n', n, '-s', 'qdisc', 'show', 'dev', this.veth[i]))?.[1] ?? 0),
      0,
    );
  }

  linkDown(host: number): void {
    ip('-n', this.ns[host], 'link', 'set', this.veth[host], 'down');
  }

  /** Ends any process still in the namespaces (all started by their user), then deletes them. */
  tearDown(): void {
    for (const n of this.ns) {
      try {
        for (const pid of ip('netns', 'pids', n).split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {}
      try {
        ip('netns', 'del', n);
      } catch {}
    }
  }
}
