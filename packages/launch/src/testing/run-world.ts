// runWorld: N real rank processes through launch(), so the ranks get exactly the environment ddp-run gives them.
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from '../launch.js';
import type { LaunchOptions } from '../options.js';
import type { WorldResult } from '../world.js';
import { launchOptionsFor } from './compiled.js';
import { RankLines } from './rank-lines.js';

export interface RunWorldOptions<R = unknown> extends Pick<LaunchOptions, 'secret' | 'maxRestarts' | 'onWorldStart'> {
  /** The rank script: a path, or a file URL such as `new URL('./test/x.child.ts', import.meta.url)`. */
  script: string | URL;
  /** Ranks to start (all on this host). */
  nprocs: number;
  /** Arguments after the script path. */
  args?: string[];
  /** Variables added to this process's environment for every rank. */
  env?: NodeJS.ProcessEnv;
  /** The world is ended (SIGTERM, then SIGKILL after killGraceMs) after this long (default 60 000 ms). */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL when ranks are ended (default 2000 ms). */
  killGraceMs?: number;
  /**
   * Resolve with whatever the ranks did. By default runWorld rejects with a WorldRunError unless
   * every rank exited 0 and printed at least one RESULT line.
   */
  allowFailure?: boolean;
  /** Called for each RESULT line as it arrives (e.g. to break something once a rank got this far). */
  onResult?: (rank: number, result: R) => void;
}

/** One rank of a finished world. */
export interface RankRun<R> {
  rank: number;
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The launcher ended this rank (another rank failed, or the world timed out). */
  endedByLauncher: boolean;
  /** Its stdout and stderr lines, without the `[rank N] ` prefix. */
  stdout: string[];
  stderr: string[];
  /** Every `RESULT <json>` line it printed to stdout, parsed, in order. */
  results: R[];
}

export interface WorldRun<R> {
  /** launch()'s exit code: 0 when every rank exited 0. */
  exitCode: number;
  timedOut: boolean;
  /** The launcher's failure summary ('' on success). */
  summary: string;
  ranks: RankRun<R>[];
  /** By rank: the last RESULT each rank printed (the only one, for most scripts). */
  results: R[];
  /** Restarts the launcher performed (maxRestarts), and every attempt's exits, oldest first. */
  restarts: number;
  attempts: WorldResult[];
}

/** A world that failed, timed out, or whose ranks did not all print a RESULT line. */
export class WorldRunError extends Error {
  override readonly name = 'WorldRunError';
  constructor(
    message: string,
    readonly run: WorldRun<unknown>,
  ) {
    super(message);
  }
}

/**
 * Runs `script` on `nprocs` real rank processes through launch() and collects each rank's exit,
 * output and `RESULT <json>` lines (a rank script reports with
 * `console.log(\`RESULT ${JSON.stringify(value)}\`)`).
 */
export async function runWorld<R = unknown>(options: RunWorldOptions<R>): Promise<WorldRun<R>> {
  const { nprocs, args = [], timeoutMs = 60_000 } = options;
  const script = options.script instanceof URL ? fileURLToPath(options.script) : options.script;
  const stdout = new RankLines<R>(options.onResult);
  const stderr = new RankLines();
  const signal = AbortSignal.timeout(timeoutMs);
  const launched = await launch({
    ...launchOptionsFor(script, { ...process.env, ...options.env }),
    args,
    nprocPerNode: nprocs,
    secret: options.secret,
    maxRestarts: options.maxRestarts,
    onWorldStart: options.onWorldStart,
    stdout,
    stderr,
    killGraceMs: options.killGraceMs ?? 2000,
    signal,
  });
  const exits = launched.attempts.at(-1)?.exits ?? [];
  const ranks = Array.from({ length: nprocs }, (_, rank): RankRun<R> => {
    const exit = exits[rank];
    return {
      rank,
      code: exit?.code ?? null,
      signal: exit?.signal ?? null,
      endedByLauncher: exit?.endedByLauncher ?? false,
      stdout: stdout.byRank[rank] ?? [],
      stderr: stderr.byRank[rank] ?? [],
      results: stdout.results[rank] ?? [],
    };
  });
  const run: WorldRun<R> = {
    exitCode: launched.exitCode,
    timedOut: signal.aborted,
    summary: launched.summary,
    ranks,
    results: ranks.map((r) => r.results.at(-1)!),
    restarts: launched.restarts,
    attempts: launched.attempts,
  };
  if (options.allowFailure) return run;
  const what = `${basename(script)} ${args.join(' ')} on ${nprocs} ranks`;
  if (launched.exitCode !== 0) {
    const why = run.timedOut ? `timed out after ${timeoutMs} ms` : `failed (exit ${launched.exitCode})`;
    throw new WorldRunError(`${what} ${why}\n${launched.summary}\n${tails(ranks, 'stderr')}`, run);
  }
  const silent = ranks.filter((r) => r.results.length === 0).map((r) => r.rank);
  if (silent.length > 0)
    throw new WorldRunError(
      `${what}: no RESULT line from rank(s) ${silent.join(', ')}\n${tails(ranks, 'stdout')}`,
      run,
    );
  return run;
}

/** The last lines of every rank's stdout or stderr, each prefixed with its rank. */
function tails(ranks: RankRun<unknown>[], stream: 'stdout' | 'stderr', lines = 15): string {
  return ranks
    .map((r) =>
      r[stream]
        .slice(-lines)
        .map((l) => `[rank ${r.rank}] ${l}`)
        .join('\n'),
    )
    .filter(Boolean)
    .join('\n');
}

/** A finished world for an assertion message: its exit, the launcher's summary, every rank's last lines. */
export function explainWorld(run: WorldRun<unknown>): string {
  const exit = `exit ${run.exitCode}${run.timedOut ? ' (timed out)' : ''}`;
  const streams = `--- stderr\n${tails(run.ranks, 'stderr', 40)}\n--- stdout\n${tails(run.ranks, 'stdout', 20)}`;
  return `${exit}\n${run.summary}\n${streams}`;
}
