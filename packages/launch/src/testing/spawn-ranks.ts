// spawnRanks: starts N rank processes directly, without the launcher, for tests that need what ddp-run
// does not do: one rank's own environment or command prefix, a handle on each child to kill or stop
// it, every rank running to its own end rather than ended when the first fails.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../port.js';
import { nodeArgsFor } from './compiled.js';

export interface RankOutcome {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Parsed `RESULT <json>` lines the script printed. */
  results: unknown[];
}

export interface SpawnRanksOptions {
  nprocs: number;
  /** The rank script: a path, or a file URL such as `new URL('./test/x.child.ts', import.meta.url)`. */
  script: string | URL;
  args?: string[];
  env?: Record<string, string>;
  /** Per-rank extra environment (e.g. a wrong secret for one rank). */
  rankEnv?: (rank: number) => Record<string, string>;
  timeoutMs?: number;
  /** Called with each child as it starts (e.g. to kill one later). */
  onSpawn?: (rank: number, child: ChildProcess) => void;
  /** false: the script prints RESULT lines of its own format (read them from stdout); default true. */
  parseResults?: boolean;
  /** Called for each RESULT line as it arrives. */
  onResult?: (rank: number, result: unknown) => void;
  /** Extra node flags (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Command prefix, e.g. ['ip', 'netns', 'exec', 'ns1'] per rank. */
  wrap?: (rank: number) => string[];
}

/** Runs `script` on `nprocs` processes with the torchrun variables; resolves when every rank has exited. */
export async function spawnRanks(opts: SpawnRanksOptions): Promise<RankOutcome[]> {
  const port = opts.env?.MASTER_PORT ?? String(await findFreePort());
  const script = opts.script instanceof URL ? fileURLToPath(opts.script) : opts.script;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const children: ChildProcess[] = [];
  const runs = Array.from({ length: opts.nprocs }, (_, rank) => {
    const cmd = [
      ...(opts.wrap?.(rank) ?? []),
      process.execPath,
      ...(opts.nodeArgs ?? []),
      ...nodeArgsFor(script, opts.args),
    ];
    const child = spawn(cmd[0], cmd.slice(1), {
      env: {
        ...process.env,
        RANK: String(rank),
        WORLD_SIZE: String(opts.nprocs),
        LOCAL_RANK: String(rank),
        LOCAL_WORLD_SIZE: String(opts.nprocs),
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: port,
        DDP_SECRET: 'test-secret',
        ...opts.env,
        ...opts.rankEnv?.(rank),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    opts.onSpawn?.(rank, child);
    const out: RankOutcome = { rank, code: null, signal: null, stdout: '', stderr: '', results: [] };
    let pending = '';
    child.stdout?.on('data', (c: Buffer) => {
      out.stdout += c.toString();
      pending += c.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('RESULT ') || opts.parseResults === false) continue;
        const r = JSON.parse(line.slice(7));
        out.results.push(r);
        opts.onResult?.(rank, r);
      }
    });
    child.stderr?.on('data', (c: Buffer) => {
      out.stderr += c.toString();
    });
    return new Promise<RankOutcome>((resolve) => {
      child.on('close', (code, signal) => {
        out.code = code;
        out.signal = signal;
        resolve(out);
      });
    });
  });
  const timer = setTimeout(() => {
    for (const c of children) c.kill('SIGKILL');
  }, timeoutMs);
  try {
    return await Promise.all(runs);
  } finally {
    clearTimeout(timer);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}

/** Describes failed ranks for an assertion message. */
export function explain(outcomes: RankOutcome[]): string {
  return outcomes
    .filter((o) => o.code !== 0)
    .map((o) => `rank ${o.rank} exited ${o.code ?? o.signal}\n${o.stderr.slice(-3000)}\n${o.stdout.slice(-1000)}`)
    .join('\n---\n');
}
