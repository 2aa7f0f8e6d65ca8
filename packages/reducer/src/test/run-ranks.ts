// Test-only: runs rank.child.ts's named scenarios on a world of real processes (@ddp/launch/testing)
// and collects each scenario's result.
import { type RankOutcome, runMpirun, spawnRanks } from '@ddp/launch/testing';

export type ScenarioResult = Record<string, unknown> & { error?: { name: string; message: string } };
/** Per rank: scenario name → its result. */
export type WorldResult = Record<string, ScenarioResult>[];

const script = new URL('./rank.child.ts', import.meta.url);

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
  const outcomes = await spawnRanks({
    nprocs: world,
    script,
    args: scenarios,
    env: { ...env, MASTER_PORT: `${port}` },
    timeoutMs,
    parseResults: false,
  });
  return outcomes.map(resultsOf);
}

/**
 * As runWorld, under `mpirun -np world` with comm's 'mpi' backend (DDP_COMM_BACKEND=mpi): no
 * store, ranks from Open MPI. `across` places the ranks on hosts (e.g. @ddp/netns's
 * TwoHosts.mpirun): mpirun's options and command prefix.
 */
export async function runMpiWorld(
  world: number,
  scenarios: string[],
  timeoutMs = 60_000,
  across: { mpirunArgs: string[]; wrap: string[] } = { mpirunArgs: [], wrap: [] },
): Promise<WorldResult> {
  const outcomes = await runMpirun({
    ...across,
    np: world,
    script,
    args: scenarios,
    env: { DDP_COMM_BACKEND: 'mpi' },
    timeoutMs,
    parseResults: false,
  });
  return outcomes.map(resultsOf);
}

/** Scenario results a rank printed (`RESULT <name> <json>` lines), with its exit under `__exit`. */
function resultsOf(o: RankOutcome): Record<string, ScenarioResult> {
  const results: Record<string, ScenarioResult> = {};
  for (const line of o.stdout.split('\n')) {
    const m = /^RESULT (\S+) (.*)$/.exec(line);
    if (m) results[m[1]] = JSON.parse(m[2]) as ScenarioResult;
  }
  results.__exit = { code: o.code, signal: o.signal, stderr: o.stderr.slice(-3000) };
  return results;
}
