import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { launchOptionsFor, RankLines } from '@ddp/launch/testing';
import { ip, TwoHosts as NetnsHosts } from '@ddp/netns';

const ddpRun = fileURLToPath(new URL('../node_modules/@ddp/launch/bin/ddp-run.js', import.meta.url));

/** How one host's ddp-run is told its place: its flags and extra environment (a scheduler's variables). */
export type HostLaunch = (
  host: number,
  masterAddr: string,
  port: string,
) => { flags: string[]; env?: Record<string, string> };

/** The flags of the reliability runs: ddp-run's own spellings. */
const plainFlags: HostLaunch = (host, masterAddr, port) => ({
  flags: [
    '--nproc-per-node',
    '2',
    '--nnodes',
    '2',
    '--node-rank',
    String(host),
    '--master-addr',
    masterAddr,
    '--master-port',
    port,
    '--rdzv-id',
    'netns',
  ],
});

export interface HostRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: RankLines<Record<string, unknown>>;
  err: RankLines;
}

/** @ddp/netns's two hosts, running `ddp-run` on each as node 0 and node 1 of one world. */
export class TwoHosts extends NetnsHosts {
  constructor() {
    super('r', '10.231.78');
  }

  /**
   * Runs `ddp-run` in each namespace (node 0 hosts the store), 2 ranks per host over
   * TCP. After timeoutMs each launcher gets SIGTERM (it ends its ranks), then SIGKILL.
   */
  /** A second link between the hosts (`subnet`.1 and .2 on interfaces `dev`); returns the interface names. */
  addLink(subnet: string): [string, string] {
    const dev: [string, string] = [`d${this.tag}a`, `d${this.tag}b`];
    ip('link', 'add', dev[0], 'type', 'veth', 'peer', 'name', dev[1]);
    this.ns.forEach((n, i) => {
      ip('link', 'set', dev[i], 'netns', n);
      ip('-n', n, 'addr', 'add', `${subnet}.${i + 1}/24`, 'dev', dev[i]);
      ip('-n', n, 'link', 'set', dev[i], 'up');
    });
    return dev;
  }

  /** Bytes host `host` has sent on interface `dev`. */
  txBytes(host: number, dev: string): number {
    return Number(
      ip('-n', this.ns[host], '-s', '-j', 'link', 'show', 'dev', dev).match(/"tx":\{"bytes":(\d+)/)?.[1] ?? 0,
    );
  }

  async run(
    script: URL,
    args: string[],
    opts: {
      timeoutMs: number;
      env?: Record<string, string>;
      launch?: HostLaunch;
      onResult?: (host: number, rank: number, r: Record<string, unknown>) => void;
    },
  ): Promise<HostRun[]> {
    const port = String(20000 + Math.floor(Math.random() * 20000));
    const children: ChildProcess[] = [];
    const runs = this.ns.map((n, host) => {
      const out = new RankLines<Record<string, unknown>>((rank, r) => opts.onResult?.(host, rank, r));
      const err = new RankLines();
      const place = (opts.launch ?? plainFlags)(host, this.addr[0], port);
      // the secret in the environment, not on the command line, where ps shows it
      const rank = launchOptionsFor(fileURLToPath(script), {
        ...process.env,
        DDP_SECRET: 'netns-secret',
        ...opts.env,
        ...place.env,
      });
      const flags = [
        ...place.flags,
        '--kill-grace-ms',
        '2000',
        ...(rank.sourceConditions ? [] : ['--no-source-conditions']),
      ];
      const child = spawn('ip', ['netns', 'exec', n, process.execPath, ddpRun, ...flags, rank.script, ...args], {
        env: rank.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      child.stdout?.pipe(out);
      child.stderr?.pipe(err);
      return new Promise<HostRun>((resolve) =>
        child.on('close', (code, signal) => resolve({ code, signal, out, err })),
      );
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
}

export function explainHosts(runs: HostRun[]): string {
  return runs
    .map((r, i) => `host ${i}: exit ${r.code ?? r.signal}\n${r.out.text.slice(-1500)}\n${r.err.text.slice(-2500)}`)
    .join('\n---\n');
}
