import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LaunchResult, launch } from '@ddp/launch';
import { LATEST_LINK, META_FILE, MODEL_FILE, OPTIMIZER_FILE } from '@ddp/nn';
import { afterAll, describe, expect, it } from 'vitest';
import { explain, RankLines } from './world.js';

/**
 * Elastic restart of apps/clip: under `ddp-run --max-restarts 2` (launch() with
 * maxRestarts), rank 1 is killed with SIGKILL once a checkpoint exists; the world restarts,
 * resumes from the last complete checkpoint and must end with model and optimizer files
 * byte-identical to an uninterrupted run with the same seed and checkpoint schedule.
 */
const train = fileURLToPath(new URL('../../../apps/clip/src/train.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'reliability-elastic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const STEPS = 6;
const ARGS = [
  '--steps',
  String(STEPS),
  '--batch-size',
  '24',
  '--lr',
  '3e-3',
  '--checkpoint-every',
  '2',
  '--eval-every',
  '0',
  '--eval-size',
  '40',
  '--seed',
  '5',
  '--resume',
];

interface ClipRun {
  result: LaunchResult;
  out: RankLines;
  err: RankLines;
  killedAtStep: number | null;
}

async function runClip(name: string, killAfterCheckpoint: boolean): Promise<ClipRun> {
  const out = new RankLines();
  const err = new RankLines();
  const ckpt = join(dir, name, 'ckpt');
  let killedAtStep: number | null = null;
  let poll: NodeJS.Timeout | undefined;
  const result = await launch({
    script: train,
    args: [...ARGS, '--out', join(dir, name), '--checkpoint-dir', ckpt],
    nprocPerNode: 2,
    maxRestarts: 2,
    killGraceMs: 2000,
    stdout: out,
    stderr: err,
    signal: AbortSignal.timeout(150_000),
    onWorldStart: ({ restartCount, pids }) => {
      if (!killAfterCheckpoint || restartCount > 0) return;
      // kill -9 rank 1 as soon as the first checkpoint is committed (`latest` points at it)
      poll = setInterval(() => {
        const meta = join(ckpt, LATEST_LINK, META_FILE);
        if (!existsSync(meta)) return;
        clearInterval(poll);
        killedAtStep = (JSON.parse(readFileSync(meta, 'utf8')) as { step: number }).step;
        process.kill(pids[1], 'SIGKILL');
      }, 20);
    },
  });
  clearInterval(poll);
  return { result, out, err, killedAtStep };
}

const file = (name: string, f: string) => readFileSync(join(dir, name, 'ckpt', LATEST_LINK, f));

describe('elastic restart of apps/clip under ddp-run --max-restarts 2', () => {
  it('a rank killed with SIGKILL: the world restarts, resumes, and ends bit-identical to an uninterrupted run', {
    timeout: 320_000,
  }, async () => {
    const straight = await runClip('straight', false);
    expect(straight.result.exitCode, explain(straight)).toBe(0);
    expect(straight.result.restarts).toBe(0);

    const killed = await runClip('killed', true);
    const why = explain(killed);
    expect(killed.killedAtStep, why).not.toBeNull();
    expect(killed.killedAtStep as number, why).toBeLessThan(STEPS);
    expect(killed.result.exitCode, why).toBe(0);
    expect(killed.result.restarts, why).toBe(1);
    // the first world ended because rank 1 was killed
    expect(killed.result.attempts[0]?.exits.find((r) => r.rank === 1)?.signal, why).toBe('SIGKILL');
    expect(killed.out.text, why).toMatch(/resumed from .* at step \d+/);
    expect(JSON.parse(file('killed', META_FILE).toString()).step).toBe(STEPS);
    expect(file('killed', MODEL_FILE).equals(file('straight', MODEL_FILE))).toBe(true);
    expect(file('killed', OPTIMIZER_FILE).equals(file('straight', OPTIMIZER_FILE))).toBe(true);
  });
});
