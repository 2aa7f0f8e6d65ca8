// Test-only: starts one real process per rank on rank.child.ts and collects each scenario's result.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type ScenarioResult = Record<string, unknown> & { error?: { name: string; message: string } };
/** Per rank: scenario name → its result. */
export type WorldResult = Record<string, ScenarioResult>[];

/**
 * Runs the named scenarios, in order, in one world of `world` ranks (rank 0's store on `port`). Resolves when every
 * rank exited (any exit code: a scenario may end its rank on purpose); a rank still
 * running after timeoutMs is killed and reported.
 */
export async function runWorld(
  port: number,
  world: number,
  scenarios: string[],
  timeoutMs = 60_000,
  env: Record<string, string> = {},
): Promise<WorldResult> {
  const script = fileURLToPath(new URL('./rank.child.ts', import.meta.url));
  return Promise.all(
    [...Array(world).keys()].map(
      (rank) =>
        new Promise<Record<string, ScenarioResult>>((resolve) => {
          const child = spawn(process.execPath, ['--conditions=@ddp/source', '--import', 'tsx', script, ...scenarios], {
            env: {
              ...process.env,
              ...env,
              RANK: `${rank}`,
              WORLD_SIZE: `${world}`,
              LOCAL_RANK: `${rank}`,
              LOCAL_WORLD_SIZE: `${world}`,
              MASTER_ADDR: '127.0.0.1',
              MASTER_PORT: `${port}`,
              DDP_SECRET: 'reducer-test',
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let out = '';
          let err = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (err += c.toString()));
          const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
          child.on('exit', (code, signal) => {
            clearTimeout(timer);
            resolve(resultsOf(out, { code, signal, stderr: err.slice(-3000) }));
          });
        }),
    ),
  );
}

/** Scenario results a rank printed (`RESULT <name> <json>` lines), with its exit under `__exit`. */
function resultsOf(stdout: string, exit: ScenarioResult): Record<string, ScenarioResult> {
  const results: Record<string, ScenarioResult> = {};
  for (const line of stdout.split('\n')) {
    const m = /^RESULT (\S+) (.*)$/.exec(line);
    if (m) results[m[1]] = JSON.parse(m[2]) as ScenarioResult;
  }
  results.__exit = exit;
  return results;
}

/**
 * As runWorld, under `mpirun -np world` with comm's 'mpi' backend (DDP_COMM_BACKEND=mpi): no
 * store, ranks from Open MPI. Each rank's output goes to its own file (--output-filename).
 * `across` places the ranks on hosts (e.g. @ddp/netns's TwoHosts.mpirun): mpirun's options and command prefix.
 */
export async function runMpiWorld(
  world: number,
  scenarios: string[],
  timeoutMs = 60_000,
  across: { mpirunArgs: string[]; wrap: string[] } = { mpirunArgs: [], wrap: [] },
): Promise<WorldResult> {
  const script = fileURLToPath(new URL('./rank.child.ts', import.meta.url));
  const dir = await mkdtemp(join(tmpdir(), 'ddp-mpirun-'));
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'].includes(k)),
  );
  const args = [
    '--allow-run-as-root',
    '--oversubscribe',
    '--output-filename',
    dir,
    ...across.mpirunArgs,
    '-np',
    `${world}`,
    '-x',
    'DDP_COMM_BACKEND=mpi',
  ];
  const [cmd, ...prefix] = [...across.wrap, 'mpirun'];
  const child = spawn(
    cmd,
    [...prefix, ...args, process.execPath, '--conditions=@ddp/source', '--import', 'tsx', script, ...scenarios],
    { env, stdio: 'ignore' },
  );
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('close', (c, s) => resolve([c, s])),
  );
  clearTimeout(timer);
  const read = (rank: number, stream: string) =>
    readFile(join(dir, '1', `rank.${rank}`, stream), 'utf8').catch(() => '');
  const worlds = await Promise.all(
    [...Array(world).keys()].map(async (rank) =>
      resultsOf(await read(rank, 'stdout'), { code, signal, stderr: (await read(rank, 'stderr')).slice(-3000) }),
    ),
  );
  await rm(dir, { recursive: true, force: true });
  return worlds;
}
