import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RankOutcome } from './spawn-world.js';

/** Test helper: runs a TypeScript script under `mpirun -np N` and splits its tagged output per rank. */

/** Why an mpirun test cannot run here (no mpirun, or no addon when the script needs it), or null. */
export async function mpirunMissing(needsAddon: boolean): Promise<string | null> {
  if (spawnSync('mpirun', ['--version']).status !== 0) return 'mpirun (Open MPI) is not installed (apt-get install openmpi-bin)';
  if (!needsAddon) return null;
  const addon = await import('@ddp/mpi').then((m) => m.loadMpi(), () => null);
  return addon ? null : '@ddp/mpi is not built (apt-get install libopenmpi-dev, then pnpm rebuild @ddp/mpi)';
}

export interface MpirunOptions {
  np: number;
  /** Script path, absolute or relative to this directory. */
  script: string;
  args?: string[];
  /** Exported to every rank (mpirun -x). */
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** Ranks' outcomes: every rank gets mpirun's exit code; stdout, stderr and RESULT lines are the rank's own. */
export async function runMpirun(opts: MpirunOptions): Promise<RankOutcome[]> {
  const script = opts.script.startsWith('/') ? opts.script : fileURLToPath(new URL(opts.script, import.meta.url));
  const exported = Object.entries(opts.env ?? {}).flatMap(([k, v]) => ['-x', `${k}=${v}`]);
  // no torchrun variables: ranks must come from Open MPI's
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'].includes(k)));
  const args = ['--allow-run-as-root', '--oversubscribe', '--tag-output', '-np', String(opts.np), ...exported];
  const child = spawn('mpirun', [...args, process.execPath, '--conditions=@ddp/source', '--import', 'tsx', script, ...(opts.args ?? [])], {
    env: { ...env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const outs: RankOutcome[] = Array.from({ length: opts.np }, (_, rank) => ({ rank, code: null, signal: null, stdout: '', stderr: '', results: [] }));
  let launcher = '';
  const lines = (stream: NodeJS.ReadableStream) => {
    let pending = '';
    stream.on('data', (c: Buffer) => {
      pending += c.toString();
      const all = pending.split('\n');
      pending = all.pop() ?? '';
      for (const line of all) {
        // --tag-output: "[jobid,rank]<stdout>:text"
        const m = /^\[\d+,(\d+)\]<(stdout|stderr)>:(.*)$/.exec(line);
        const o = m ? outs[Number(m[1])] : undefined;
        if (!m || !o) launcher += `${line}\n`;
        else if (m[2] === 'stderr') o.stderr += `${m[3]}\n`;
        else {
          o.stdout += `${m[3]}\n`;
          if (m[3]?.startsWith('RESULT ')) o.results.push(JSON.parse(m[3].slice(7)));
        }
      }
    });
  };
  lines(child.stdout);
  lines(child.stderr);
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  for (const o of outs) {
    o.code = code;
    o.signal = signal;
    if (code !== 0) o.stderr += launcher;
  }
  return outs;
}
