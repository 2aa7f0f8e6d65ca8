import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeArgsFor } from './compiled.js';
import type { RankOutcome } from './spawn-ranks.js';

/** Test helper: runs a TypeScript script under `mpirun -np N` and collects each rank's output. */

/** Why an mpirun test cannot run here, or null. */
export function mpirunMissing(): string | null {
  return spawnSync('mpirun', ['--version']).status === 0
    ? null
    : 'mpirun (Open MPI) is not installed (apt-get install openmpi-bin)';
}

export interface MpirunOptions {
  np: number;
  /** The rank script: a path, or a file URL such as `new URL('./test/x.child.ts', import.meta.url)`. */
  script: string | URL;
  args?: string[];
  /** Exported to every rank (mpirun -x). */
  env?: Record<string, string>;
  timeoutMs?: number;
  /** Options before -np (e.g. hosts, MCA parameters). */
  mpirunArgs?: string[];
  /** false: the script prints RESULT lines of its own format (read them from stdout); default true. */
  parseResults?: boolean;
  /** Command prefix of mpirun itself, e.g. ['ip', 'netns', 'exec', 'ns1']. */
  wrap?: string[];
}

/** Ranks' outcomes: every rank gets mpirun's exit code; stdout, stderr and RESULT lines are the rank's own. */
export async function runMpirun(opts: MpirunOptions): Promise<RankOutcome[]> {
  const script = opts.script instanceof URL ? fileURLToPath(opts.script) : opts.script;
  const exported = Object.entries(opts.env ?? {}).flatMap(([k, v]) => ['-x', `${k}=${v}`]);
  // no torchrun variables: ranks must come from Open MPI's
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'].includes(k)),
  );
  // one file per rank and stream (--tag-output would cut long lines into tagged pieces)
  const dir = await mkdtemp(join(tmpdir(), 'ddp-mpirun-'));
  const args = [
    '--allow-run-as-root',
    '--oversubscribe',
    '--output-filename',
    dir,
    ...(opts.mpirunArgs ?? []),
    '-np',
    String(opts.np),
    ...exported,
  ];
  const [cmd, ...prefix] = [...(opts.wrap ?? []), 'mpirun'];
  const child = spawn(cmd, [...prefix, ...args, process.execPath, ...nodeArgsFor(script, opts.args)], {
    env: { ...env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let launcher = '';
  child.stderr.on('data', (c: Buffer) => {
    launcher += c.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('close', (c, s) => resolve([c, s])),
  );
  clearTimeout(timer);
  const read = (rank: number, stream: string) =>
    readFile(join(dir, '1', `rank.${rank}`, stream), 'utf8').catch(() => '');
  const outs = await Promise.all(
    Array.from({ length: opts.np }, async (_, rank): Promise<RankOutcome> => {
      const stdout = await read(rank, 'stdout');
      const results = stdout
        .split('\n')
        .filter((l) => l.startsWith('RESULT ') && opts.parseResults !== false)
        .map((l) => JSON.parse(l.slice(7)) as unknown);
      const stderr = (await read(rank, 'stderr')) + (code === 0 ? '' : launcher.slice(-2000));
      return { rank, code, signal, stdout, stderr, results };
    }),
  );
  await rm(dir, { recursive: true, force: true });
  return outs;
}
