import { createWriteStream, mkdirSync, mkdtempSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { LaunchConfigError } from './errors.js';

/** torchrun's Std bitmask: 0 none, 1 stdout, 2 stderr, 3 both. */
export type StdMask = 0 | 1 | 2 | 3;
/** One mask for every local rank, or one per local rank (`0:3,1:0`: the others get 0). */
export type StdSpec = StdMask | Map<number, StdMask>;

/** Parses torchrun's `--redirects`/`--tee` value: `3`, or `0:3,1:1` per local rank. */
export function parseStd(value: string): StdSpec {
  if (/^[0-3]$/.test(value)) return Number(value) as StdMask;
  if (/^\d+:[0-3](,\d+:[0-3])*$/.test(value)) {
    return new Map(value.split(',').map((m) => m.split(':').map(Number) as [number, StdMask]));
  }
  throw new LaunchConfigError(`${value} is not 0-3 (none, stdout, stderr, both) or local-rank:mask pairs like 0:3,1:0`);
}

const maskOf = (spec: StdSpec | undefined, localRank: number): number =>
  spec === undefined ? 0 : typeof spec === 'number' ? spec : (spec.get(localRank) ?? 0);

/** Where one stream of one rank goes: the console (prefixed), a log file, or both (tee). */
export interface StreamRoute {
  console: boolean;
  file: string | undefined;
}

/**
 * torchrun's layout: `<logDir>/<runId>_<random>/attempt_<n>/<localRank>/{stdout,stderr}.log`.
 * A redirected stream goes to its file only; a tee'd one to its file and the console.
 */
export class RunLogs {
  readonly dir: string;

  constructor(
    logDir: string,
    runId: string,
    private readonly redirects: StdSpec | undefined,
    private readonly tee: StdSpec | undefined,
  ) {
    mkdirSync(logDir, { recursive: true });
    this.dir = mkdtempSync(join(logDir, `${runId.replace(/[/\\]/g, '_')}_`));
  }

  route(attempt: number, localRank: number, stream: 'stdout' | 'stderr'): StreamRoute {
    const bit = stream === 'stdout' ? 1 : 2;
    const redirected = (maskOf(this.redirects, localRank) & bit) !== 0;
    const teed = (maskOf(this.tee, localRank) & bit) !== 0;
    if (!redirected && !teed) return { console: true, file: undefined };
    const dir = join(this.dir, `attempt_${attempt}`, String(localRank));
    mkdirSync(dir, { recursive: true });
    return { console: !redirected || teed, file: join(dir, `${stream}.log`) };
  }
}

/** A sink for redirected output: it is kept for the failure summary, not shown. */
export const discard = (): Writable => new Writable({ write: (_c, _e, done) => done() });

export function openLog(file: string): WriteStream {
  return createWriteStream(file, { flags: 'a' });
}
