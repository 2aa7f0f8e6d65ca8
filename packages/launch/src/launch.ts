import { constants } from 'node:os';
import { LaunchConfigError } from './errors.js';
import { type LaunchOptions, planLaunch } from './options.js';
import { findFreePort } from './port.js';
import { describeExit, failureSummary } from './summary.js';
import { type RankExit, World, type WorldResult } from './world.js';

/** What a launch came to. */
export interface LaunchResult {
  /** 0: every rank succeeded; 1: a rank failed (after any restarts); 128+n: interrupted by signal n. */
  exitCode: number;
  /** Restarts performed (DDP_RESTART_COUNT of the last attempt). */
  restarts: number;
  /** One entry per attempt, oldest first. */
  attempts: WorldResult[];
  /** The first rank that failed by itself in the last attempt. */
  failure: RankExit | undefined;
  /** The signal ddp-run received and forwarded, if any. */
  interrupted: NodeJS.Signals | undefined;
  /** The failure summary written to stderr ('' on success). */
  summary: string;
}

/** Extra launch controls for the CLI and embedders. */
export interface LaunchControls {
  /** Forward SIGINT, SIGTERM, SIGHUP and SIGQUIT received by this process to the ranks (the CLI does). */
  forwardSignals?: boolean;
}

// torchrun's: a lost ssh session (SIGHUP) killed ddp-run at once, and its ranks' save-on-signal never ran (probe CS)
const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

/**
 * Starts `nprocPerNode` ranks of `script` with the torchrun environment, prefixes their output,
 * ends the world when one fails, and restarts it up to `maxRestarts` times.
 */
export async function launch(options: LaunchOptions, controls: LaunchControls = {}): Promise<LaunchResult> {
  const plan = planLaunch(options);
  const log = (message: string): void => {
    plan.stderr.write(`[ddp-run] ${message}\n`);
  };
  if (plan.logs) log(`log directory: ${plan.logs.dir}`);
  let world: World | undefined;
  let interrupted: NodeJS.Signals | undefined;
  const interrupt = (signal: NodeJS.Signals): void => {
    interrupted ??= signal;
    world?.interrupt(signal);
  };
  const onAbort = (): void => {
    const reason: unknown = options.signal?.reason;
    interrupt(typeof reason === 'string' && reason in constants.signals ? (reason as NodeJS.Signals) : 'SIGTERM');
  };
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (controls.forwardSignals) for (const s of FORWARDED) process.on(s, interrupt);

  const attempts: WorldResult[] = [];
  try {
    if (options.signal?.aborted) onAbort();
    for (let restartCount = 0; interrupted === undefined; restartCount++) {
      const masterPort = plan.masterPort ?? (await freePortOn(plan.masterAddr));
      if (interrupted !== undefined) break;
      world = new World(plan, restartCount, masterPort);
      options.onWorldStart?.({ restartCount, masterPort, pids: world.pids });
      const result = await world.done;
      attempts.push(result);
      const failed = result.failed;
      if (failed === undefined || result.interrupted !== undefined || restartCount >= plan.maxRestarts) break;
      log(
        `rank ${failed.rank} ${describeExit(failed)}; restarting the world ` +
          `(restart ${restartCount + 1} of ${plan.maxRestarts})`,
      );
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    if (controls.forwardSignals) for (const s of FORWARDED) process.off(s, interrupt);
  }

  const last = attempts.at(-1);
  const restarts = last?.restartCount ?? 0;
  const summary = last === undefined ? '' : failureSummary(last, restarts, plan.maxRestarts);
  if (summary !== '') plan.stderr.write(summary);
  let exitCode = 0;
  if (last?.failed !== undefined) exitCode = 1;
  else if (interrupted !== undefined) {
    exitCode = 128 + constants.signals[interrupted];
    log(`interrupted by ${interrupted}; ranks ended`);
  }
  return { exitCode, restarts, attempts, failure: last?.failed, interrupted, summary };
}

/** A free port on the master address, which must be this node's (ddp-run crashed with a plain Node error). */
async function freePortOn(masterAddr: string): Promise<number> {
  try {
    return await findFreePort(masterAddr);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EADDRNOTAVAIL' && code !== 'ENOTFOUND' && code !== 'EAI_AGAIN') throw e;
    throw new LaunchConfigError(
      `--master-addr ${masterAddr} (${code}): not an address of this machine, where rank 0 hosts the store: ` +
        "leave it out or give one of this machine's (across nodes, give node 0's with --master-port too)",
    );
  }
}
