import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { RankLines } from './world.js';

/**
 * Two "hosts": network namespaces joined by a veth pair (as packages/comm's two-host test
 * does), with helpers to shape the link (tc tbf: this kernel has no netem), take it down,
 * and run `ddp-run` on each host as node 0 and node 1 of one world. Needs root.
 */

export function ip(...args: string[]): string {
  return execFileSync('ip', args, { stdio: 'pipe' }).toString();
}

function tc(...args: string[]): string {
  return execFileSync('tc', args, { stdio: 'pipe' }).toString();
}

const ddpRun = fileURLToPath(new URL('../node_modules/@ddp/launch/bin/ddp-run.js', import.meta.url));

export interface HostRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: RankLines;
  err: RankLines;
}

export class TwoHosts {
  readonly tag = randomBytes(3).toString('hex');
  readonly ns = [`ddp-ra-${this.tag}`, `ddp-rb-${this.tag}`];
  readonly veth = [`rv${this.tag}a`, `rv${this.tag}b`];
  readonly addr = ['10.231.78.1', '10.231.78.2'];

  /** Creates both namespaces; returns why it cannot (not root, no ip netns), or null. */
  setUp(): string | null {
    if (process.getuid?.() !== 0) return 'not root';
    try {
      for (const n of this.ns) ip('netns', 'add', n);
      ip('link', 'add', this.veth[0] as string, 'type', 'veth', 'peer', 'name', this.veth[1] as string);
      this.ns.forEach((n, i) => {
        ip('link', 'set', this.veth[i] as string, 'netns', n);
        ip('-n', n, 'addr', 'add', `${this.addr[i]}/24`, 'dev', this.veth[i] as string);
        ip('-n', n, 'link', 'set', this.veth[i] as string, 'up');
        ip('-n', n, 'link', 'set', 'lo', 'up');
      });
      return null;
    } catch (e) {
      this.tearDown();
      return `cannot create network namespaces: ${(e as Error).message.split('\n')[0]}`;
    }
  }

  /** Token-bucket limit on both ends of the link. */
  limit(rate: string): void {
    for (const [i, n] of this.ns.entries()) tc('-n', n, 'qdisc', 'replace', 'dev', this.veth[i] as string, 'root', 'tbf', 'rate', rate, 'burst', '32kbit', 'latency', '400ms');
  }

  /** Packets the token bucket held back (over its rate), summed over both ends. */
  overlimits(): number {
    return this.ns.reduce((sum, n, i) => sum + Number(/overlimits (\d+)/.exec(tc('-n', n, '-s', 'qdisc', 'show', 'dev', this.veth[i] as string))?.[1] ?? 0), 0);
  }

  linkDown(host: number): void {
    ip('-n', this.ns[host] as string, 'link', 'set', this.veth[host] as string, 'down');
  }

  /**
   * Runs `ddp-run` in each namespace (node 0 hosts the store), 2 ranks per host over
   * TCP. After timeoutMs each launcher gets SIGTERM (it ends its ranks), then SIGKILL.
   */
  async run(script: string, args: string[], opts: { timeoutMs: number; env?: Record<string, string>; onResult?: (host: number, rank: number, r: Record<string, unknown>) => void }): Promise<HostRun[]> {
    const port = String(20000 + Math.floor(Math.random() * 20000));
    const children: ChildProcess[] = [];
    const runs = this.ns.map((n, host) => {
      const out = new RankLines();
      const err = new RankLines();
      out.onResult = (rank, r) => opts.onResult?.(host, rank, r);
      const flags = ['--nproc-per-node', '2', '--nnodes', '2', '--node-rank', String(host), '--master-addr', this.addr[0] as string, '--master-port', port, '--secret', 'netns-secret', '--kill-grace-ms', '2000'];
      const child = spawn('ip', ['netns', 'exec', n, process.execPath, ddpRun, ...flags, script, ...args], {
        env: { ...process.env, ...opts.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      child.stdout?.pipe(out);
      child.stderr?.pipe(err);
      return new Promise<HostRun>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, out, err })));
    });
    const term = setTimeout(() => {
      for (const c of children) c.kill('SIGTERM');
    }, opts.timeoutMs);
    const kill = setTimeout(() => {
      for (const c of children) c.kill('SIGKILL');
    }, opts.timeoutMs + 5000);
    try {
      return await Promise.all(runs);
    } finally {
      clearTimeout(term);
      clearTimeout(kill);
    }
  }

  /** Ends any process still in the namespaces (all started by this test), then deletes them. */
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

export function explainHosts(runs: HostRun[]): string {
  return runs.map((r, i) => `host ${i}: exit ${r.code ?? r.signal}\n${r.out.text.slice(-1500)}\n${r.err.text.slice(-2500)}`).join('\n---\n');
}
