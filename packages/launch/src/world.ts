import { type ChildProcess, spawn } from 'node:child_process';
import type { WriteStream } from 'node:fs';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { finished } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { PrefixedLines } from './lines.js';
import { discard, openLog } from './logs.js';
import { type LaunchPlan, rankEnv } from './options.js';

/** How one rank of one world ended. */
export interface RankExit {
  rank: number;
  localRank: number;
  pid: number | undefined;
  /** Exit code, or null when a signal ended it or it never started. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** ddp-run had signalled this rank before it ended (it did not fail by itself). */
  endedByLauncher: boolean;
  /** Why the process could not be started, if it could not. */
  spawnError?: string;
  stderrTail: string[];
  stdoutTail: string[];
}

/** One attempt: every local rank started, run and ended. */
export interface WorldResult {
  restartCount: number;
  masterPort: number;
  exits: RankExit[];
  /** The first rank that failed by itself (non-zero exit, signal, or no start). */
  failed: RankExit | undefined;
  /** The signal forwarded to the ranks when ddp-run itself was interrupted. */
  interrupted: NodeJS.Signals | undefined;
}

interface RankProcess {
  exit: RankExit;
  child: ChildProcess;
  out: PrefixedLines;
  err: PrefixedLines;
  exited: boolean;
  closed: boolean;
  /** Log files of its redirected or tee'd streams. */
  files: WriteStream[];
}

/** After a rank exits, how long its pipes may stay open (held by a grandchild) before we stop reading. */
const PIPE_DRAIN_MS = 2000;

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
/**
 * Every rank ddp-run starts imports it: it ends a rank whose ddp-run died. Plain JavaScript, so a rank
 * running built JavaScript needs no TypeScript loader for it.
 */
const launcherWatch = new URL('./launcher-watch.js', import.meta.url).href;

/**
 * The monorepo's export condition that points every @ddp package at its src/*.ts. Only this
 * package's workspace package.json has it (the published one drops it: publishConfig.exports),
 * so an installed ddp-run never passes it and its ranks run the packages' dist/.
 */
const WORKSPACE_CONDITION = '@ddp/source';
const ownExports = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).exports;
const inWorkspace = WORKSPACE_CONDITION in (ownExports?.['.'] ?? {});

const isTypeScript = (file: string) => /\.[cm]?tsx?$/.test(file);

/**
 * The node arguments that run `script` (the test harnesses start ranks the same way). tsx's loader
 * only where TypeScript runs: the script or an import is .ts, or the @ddp packages resolve to their
 * src/*.ts; it costs each rank ~0.5 s of CPU at start-up (a loader thread and a transform per module).
 */
export function scriptArgs(script: string, args: string[], sourceConditions = true, imports: string[] = []): string[] {
  const conditions = sourceConditions && inWorkspace ? [`--conditions=${WORKSPACE_CONDITION}`] : [];
  const typeScript = conditions.length > 0 || [script, ...imports].some(isTypeScript);
  const loader = typeScript ? ['--import', tsxLoader] : [];
  return [...conditions, ...loader, ...imports.flatMap((i) => ['--import', i]), script, ...args];
}

/** Sends `signal` to a rank's process group (each rank leads its own), so its children end too. */
function signalGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * The local ranks of one attempt. The first rank to fail by itself ends the others: SIGTERM,
 * then SIGKILL after the plan's grace period. `done` settles once every rank has ended.
 */
export class World {
  readonly done: Promise<WorldResult>;
  private readonly ranks: RankProcess[];
  private failed: RankExit | undefined;
  private interrupted: NodeJS.Signals | undefined;
  private killTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly plan: LaunchPlan,
    readonly restartCount: number,
    readonly masterPort: number,
  ) {
    this.ranks = Array.from({ length: plan.nprocPerNode }, (_, localRank) => this.start(localRank));
    this.done = Promise.all(this.ranks.map((r) => this.closed(r))).then(() => {
      clearTimeout(this.killTimer);
      return {
        restartCount,
        masterPort,
        exits: this.ranks.map((r) => r.exit),
        failed: this.failed,
        interrupted: this.interrupted,
      };
    });
  }

  get pids(): number[] {
    return this.ranks.flatMap((r) => (r.child.pid === undefined ? [] : [r.child.pid]));
  }

  /** Forwards a signal ddp-run received; a second one kills at once. */
  interrupt(signal: NodeJS.Signals): void {
    if (this.interrupted !== undefined) {
      this.end('SIGKILL');
      return;
    }
    this.interrupted = signal;
    this.end(signal);
  }

  private start(localRank: number): RankProcess {
    const rank = this.plan.nodeRank * this.plan.nprocPerNode + localRank;
    const args = scriptArgs(this.plan.script, this.plan.args, this.plan.sourceConditions, [launcherWatch]);
    const child = spawn(process.execPath, args, {
      cwd: this.plan.cwd,
      env: {
        ...rankEnv(this.plan, localRank, this.masterPort, this.restartCount),
        ...threadsEnv(this.plan),
        DDP_LAUNCHER_PID: String(process.pid),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const prefix = `[rank ${rank}] `;
    const files: WriteStream[] = [];
    // a redirected stream still passes through PrefixedLines, which keeps its tail for the summary
    const route = (stream: 'stdout' | 'stderr', source: NodeJS.ReadableStream | null): PrefixedLines => {
      const where = this.plan.logs?.route(this.restartCount, localRank, stream) ?? { console: true, file: undefined };
      const lines = new PrefixedLines(prefix, where.console ? this.plan[stream] : discard());
      if (where.file !== undefined && source) {
        const file = openLog(where.file);
        files.push(file);
        source.pipe(file);
      }
      return lines;
    };
    const r: RankProcess = {
      exit: {
        rank,
        localRank,
        pid: child.pid,
        code: null,
        signal: null,
        endedByLauncher: false,
        stderrTail: [],
        stdoutTail: [],
      },
      child,
      out: route('stdout', child.stdout),
      err: route('stderr', child.stderr),
      exited: false,
      closed: false,
      files,
    };
    r.exit.stdoutTail = r.out.tail;
    r.exit.stderrTail = r.err.tail;
    if (child.stdout) r.out.attach(child.stdout);
    if (child.stderr) r.err.attach(child.stderr);
    child.on('exit', (code, signal) => this.onExit(r, code, signal));
    child.on('error', (error) => {
      r.exit.spawnError = error.message;
      this.onExit(r, null, null);
    });
    return r;
  }

  private onExit(r: RankProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (r.exited) return;
    r.exited = true;
    r.exit.code = code;
    r.exit.signal = signal;
    // signalled, yet it ended with an error code of its own, not by the signal (ranks install no handler):
    // it failed by itself (the rank that threw, while its peer's PeerLostError reached ddp-run first), and
    // the summary labelled its own error "ended by ddp-run" (probe AG)
    if (r.exit.endedByLauncher && signal === null && code !== null && code !== 0) r.exit.endedByLauncher = false;
    const failedItself = code !== 0 && !r.exit.endedByLauncher;
    if (failedItself && this.failed === undefined && this.interrupted === undefined) {
      this.failed = r.exit;
      this.end('SIGTERM');
    }
  }

  private closed(r: RankProcess): Promise<void> {
    return new Promise((resolveClosed) => {
      const finish = (): void => {
        if (r.closed) return;
        r.closed = true;
        r.out.flush();
        r.err.flush();
        for (const file of r.files) file.end();
        // the log files are whole once launch() returns
        Promise.all(r.files.map((f) => finished(f).catch(() => {}))).then(() => resolveClosed());
      };
      r.child.on('close', finish);
      const drain = (): void => {
        setTimeout(() => {
          r.child.stdout?.destroy();
          r.child.stderr?.destroy();
          finish();
        }, PIPE_DRAIN_MS).unref();
      };
      r.child.on('exit', drain);
      r.child.on('error', drain);
    });
  }

  /** Signals every rank still running (or whose group still holds its pipes); SIGKILL follows. */
  private end(signal: NodeJS.Signals): void {
    for (const r of this.ranks) {
      if (r.closed) continue;
      if (!r.exited) r.exit.endedByLauncher = true;
      signalGroup(r.child.pid, signal);
    }
    if (signal !== 'SIGKILL' && this.killTimer === undefined) {
      this.killTimer = setTimeout(() => this.end('SIGKILL'), this.plan.killGraceMs);
      this.killTimer.unref();
    }
  }
}

/**
 * Kernel threads per rank, as torchrun sets OMP_NUM_THREADS: the host's cores shared among
 * its ranks, unless the user chose (DDP_NUM_THREADS, or OMP_NUM_THREADS, which @ddp/tensor reads next).
 */
function threadsEnv(plan: LaunchPlan): NodeJS.ProcessEnv {
  if (plan.env.DDP_NUM_THREADS !== undefined || plan.env.OMP_NUM_THREADS !== undefined) return {};
  return { DDP_NUM_THREADS: String(Math.max(1, Math.floor(availableParallelism() / plan.nprocPerNode))) };
}
