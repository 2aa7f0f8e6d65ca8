import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { launch } from '@ddp/launch';

/** Collects whole lines written by the launcher. */
class Lines extends Writable {
  readonly lines: string[] = [];
  private rest = '';
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    const parts = (this.rest + chunk.toString()).split('\n');
    this.rest = parts.pop() ?? '';
    this.lines.push(...parts);
    done();
  }
}

/**
 * Runs `script` (relative to this directory) on `n` real rank processes through @ddp/launch
 * and returns each rank's `RESULT {json}` line, by rank. Rejects with the failure summary.
 */
export async function runWorld<R>(script: string, n: number, args: string[], timeoutMs: number): Promise<R[]> {
  const out = new Lines();
  const err = new Lines();
  const signal = AbortSignal.timeout(timeoutMs);
  const result = await launch({
    script: fileURLToPath(new URL(script, import.meta.url)),
    args,
    nprocPerNode: n,
    stdout: out,
    stderr: err,
    killGraceMs: 2000,
    signal,
  });
  if (result.exitCode !== 0) throw new Error(`${script} ${args.join(' ')} failed${signal.aborted ? ' (timed out)' : ''}\n${result.summary}\n${err.lines.slice(-30).join('\n')}`);
  const byRank: R[] = [];
  for (const line of out.lines) {
    const match = /^\[rank (\d+)\] RESULT (.*)$/.exec(line);
    if (match) byRank[Number(match[1])] = JSON.parse(match[2]!) as R;
  }
  if (byRank.length !== n || byRank.includes(undefined as R)) throw new Error(`missing RESULT lines:\n${out.lines.join('\n')}`);
  return byRank;
}
