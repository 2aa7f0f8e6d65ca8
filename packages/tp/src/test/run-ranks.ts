import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { launch } from '@ddp/launch';

/** Test helper: runs `script` (beside this file) on `n` real ranks; returns each rank's `RESULT <json>` line. */
export async function runRanks<T>(script: string, n: number, args: string[] = [], timeoutMs = 60_000): Promise<T[]> {
  let out = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  const result = await launch({
    script: fileURLToPath(new URL(script, import.meta.url)),
    args,
    nprocPerNode: n,
    stdout: sink,
    stderr: sink,
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (result.exitCode !== 0) throw new Error(`ranks failed (exit ${result.exitCode}):\n${result.summary}\n${out.slice(-3000)}`);
  const results: T[] = [];
  for (const m of out.matchAll(/^\[rank (\d+)\] RESULT (.*)$/gm)) results[Number(m[1])] = JSON.parse(m[2]!) as T;
  if (results.filter(Boolean).length !== n) throw new Error(`expected a RESULT from each of ${n} ranks:\n${out.slice(-3000)}`);
  return results;
}
