import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { type LaunchOptions, type LaunchResult, launch } from '@ddp/launch';

/** Runs a world of rank scripts with @ddp/launch and collects each rank's `RESULT <json>` lines. */

export const childScript = (name: string): string => fileURLToPath(new URL(`./children/${name}`, import.meta.url));

/** Keeps the launcher's prefixed lines and parses `[rank N] RESULT {…}` as they arrive. */
export class RankLines extends Writable {
  text = '';
  readonly results = new Map<number, Record<string, unknown>[]>();
  private pending = '';
  onResult: (rank: number, r: Record<string, unknown>) => void = () => {};
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    const s = chunk.toString();
    this.text += s;
    this.pending += s;
    const lines = this.pending.split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^\[rank (\d+)\] RESULT (.*)$/.exec(line);
      if (!m) continue;
      const rank = Number(m[1]);
      const r = JSON.parse(m[2]) as Record<string, unknown>;
      this.results.set(rank, [...(this.results.get(rank) ?? []), r]);
      this.onResult(rank, r);
    }
    done();
  }
  /** The last result of each rank 0…n−1 (undefined where a rank reported none). */
  last(n: number): (Record<string, unknown> | undefined)[] {
    return Array.from({ length: n }, (_, r) => this.results.get(r)?.at(-1));
  }
}

export interface WorldRun {
  result: LaunchResult;
  out: RankLines;
  err: RankLines;
}

/**
 * Launches `nproc` ranks of children/<script>; the whole world is ended (SIGTERM, then
 * SIGKILL) after timeoutMs, so a hang shows up as a failed launch, never a stuck test.
 */
export async function runWorld(
  script: string,
  nproc: number,
  opts: Partial<LaunchOptions> & { timeoutMs: number; onResult?: RankLines['onResult'] },
): Promise<WorldRun> {
  const out = new RankLines();
  const err = new RankLines();
  if (opts.onResult) out.onResult = opts.onResult;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort('SIGKILL'), opts.timeoutMs);
  try {
    const result = await launch({
      killGraceMs: 2000,
      ...opts,
      script: childScript(script),
      nprocPerNode: nproc,
      stdout: out,
      stderr: err,
      signal: abort.signal,
      env: { ...process.env, ...opts.env },
    });
    return { result, out, err };
  } finally {
    clearTimeout(timer);
  }
}

/** Tail of a world's output, for assertion messages. */
export function explain(run: WorldRun): string {
  return (
    `exit ${run.result.exitCode}\n${run.result.summary}\n--- stdout\n${run.out.text.slice(-2000)}\n--- ` +
    `stderr\n${run.err.text.slice(-3000)}`
  );
}
