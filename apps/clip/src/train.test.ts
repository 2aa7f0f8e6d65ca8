import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { launch } from '@ddp/launch';
import { META_FILE, MODEL_FILE, OPTIMIZER_FILE } from '@ddp/nn';
import { afterAll, describe, expect, it } from 'vitest';
import type { MetricRow } from './metrics.js';

const dir = mkdtempSync(join(tmpdir(), 'clip-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TINY = ['--steps', '6', '--batch-size', '24', '--lr', '3e-3', '--checkpoint-every', '3', '--eval-every', '0', '--eval-size', '60', '--seed', '3'];

/** train.ts on 2 real ranks through @ddp/launch (what `ddp-run --nproc-per-node 2` does). */
async function train(name: string, extra: string[]): Promise<string> {
  let out = '';
  const sink = new Writable({
    write(c: Buffer, _e, done) {
      out += c.toString();
      done();
    },
  });
  const result = await launch(
    {
      script: fileURLToPath(new URL('./train.ts', import.meta.url)),
      args: [...TINY, '--out', join(dir, name), '--checkpoint-dir', join(dir, name, 'ckpt'), ...extra],
      nprocPerNode: 2,
      stdout: sink,
      stderr: sink,
      signal: AbortSignal.timeout(120_000),
    },
    { forwardSignals: false },
  );
  expect(result.exitCode, `${result.summary}\n${out.slice(-3000)}`).toBe(0);
  return out;
}

const rows = (name: string): MetricRow[] =>
  readFileSync(join(dir, name, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricRow);
const bytes = (name: string, file: string) => readFileSync(join(dir, name, 'ckpt', file));

describe('apps/clip on 2 ranks', () => {
  it('trains (loss falls), checkpoints, and a resumed run ends bit-identical to an uninterrupted one', async () => {
    await train('straight', []);
    const losses = rows('straight').filter((r) => r.loss !== undefined).map((r) => r.loss!);
    expect(losses).toHaveLength(6);
    expect(losses.slice(3).reduce((a, b) => a + b) / 3).toBeLessThan(losses.slice(0, 3).reduce((a, b) => a + b) / 3);
    expect(rows('straight').at(-1)!.zeroShotTop1).toBeGreaterThanOrEqual(0);
    expect(JSON.parse(bytes('straight', META_FILE).toString()).step).toBe(6);

    await train('resumed', ['--exit-after', '3']);
    expect(JSON.parse(bytes('resumed', META_FILE).toString()).step).toBe(3);
    const log = await train('resumed', ['--resume']);
    expect(log).toMatch(/resumed from .* at step 3/);
    expect(rows('resumed').filter((r) => r.loss !== undefined).map((r) => r.loss)).toEqual(losses);
    expect(bytes('resumed', MODEL_FILE).equals(bytes('straight', MODEL_FILE))).toBe(true);
    expect(bytes('resumed', OPTIMIZER_FILE).equals(bytes('straight', OPTIMIZER_FILE))).toBe(true);
  }, 300_000);
});
