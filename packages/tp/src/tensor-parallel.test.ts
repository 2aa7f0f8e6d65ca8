import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { launch } from '@ddp/launch';
import { describe, expect, it } from 'vitest';

/** Test helper: runs `script` (in src/test/) on `n` real ranks; returns each rank's `RESULT <json>` line. */
async function runRanks<T>(script: string, n: number, args: string[] = [], timeoutMs = 60_000): Promise<T[]> {
  let out = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  const result = await launch({
    script: fileURLToPath(new URL(script, new URL('./test/', import.meta.url))),
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

interface RankResult {
  logits: number;
  weights: number;
  worst: string[];
  leaked: number;
  layers: Record<string, number>;
  dpRank: number;
  tpRank: number;
}

function check(results: RankResult[]): void {
  for (const [rank, r] of results.entries()) {
    expect(r.logits, `rank ${rank}: logits vs the unsharded model`).toBeLessThan(1e-5);
    expect(r.weights, `rank ${rank}: weights after one AdamW step (${r.worst.join(', ')})`).toBeLessThan(1e-5);
    expect(r.leaked, `rank ${rank}: tensors leaked per training step`).toBe(0);
    for (const [what, d] of Object.entries(r.layers)) expect(d, `rank ${rank}: ${what} vs nn.Linear`).toBeLessThan(1e-5);
  }
}

describe('tensor parallelism across real processes', () => {
  it('tp = 2: a 2-block transformer gives the unsharded logits, and weights after an AdamW step', async () => {
    const results = await runRanks<RankResult>('./tp.child.ts', 2, ['2']);
    expect(results.map((r) => r.tpRank)).toEqual([0, 1]);
    check(results);
  }, 90_000);

  it('dp 2 × tp 2 on 4 ranks: each tp group of the grid does the same', async () => {
    const results = await runRanks<RankResult>('./tp.child.ts', 4, ['2']);
    expect(results.map((r) => [r.dpRank, r.tpRank])).toEqual([[0, 0], [0, 1], [1, 0], [1, 1]]);
    check(results);
  }, 90_000);
});
