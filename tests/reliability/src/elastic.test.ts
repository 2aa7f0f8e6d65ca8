import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { explainWorld, runWorld, type WorldRun } from '@ddp/launch/testing';
import { LATEST_LINK, META_FILE, MODEL_FILE, OPTIMIZER_FILE, parseSafetensors, sameContents } from '@ddp/nn';
import { afterAll, describe, expect, it } from 'vitest';

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
  run: WorldRun<unknown>;
  killedAtStep: number | null;
}

async function runClip(name: string, killAfterCheckpoint: boolean): Promise<ClipRun> {
  const ckpt = join(dir, name, 'ckpt');
  let killedAtStep: number | null = null;
  let poll: NodeJS.Timeout | undefined;
  // the training script prints no RESULT lines: the test reads its checkpoints and exits
  const run = await runWorld({
    script: train,
    args: [...ARGS, '--out', join(dir, name), '--checkpoint-dir', ckpt],
    nprocs: 2,
    maxRestarts: 2,
    timeoutMs: 150_000,
    allowFailure: true,
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
  return { run, killedAtStep };
}

const file = (name: string, f: string) => readFileSync(join(dir, name, 'ckpt', LATEST_LINK, f));

describe('elastic restart of apps/clip under ddp-run --max-restarts 2', () => {
  it('a rank killed with SIGKILL: the world restarts, resumes, and ends bit-identical to an uninterrupted run', {
    timeout: 320_000,
  }, async () => {
    const straight = await runClip('straight', false);
    expect(straight.run.exitCode, explainWorld(straight.run)).toBe(0);
    expect(straight.run.restarts).toBe(0);

    const killed = await runClip('killed', true);
    const why = explainWorld(killed.run);
    expect(killed.killedAtStep, why).not.toBeNull();
    expect(killed.killedAtStep as number, why).toBeLessThan(STEPS);
    expect(killed.run.exitCode, why).toBe(0);
    expect(killed.run.restarts, why).toBe(1);
    // the first world ended because rank 1 was killed
    expect(killed.run.attempts[0]?.exits.find((r) => r.rank === 1)?.signal, why).toBe('SIGKILL');
    expect(killed.run.ranks.flatMap((r) => r.stdout).join('\n'), why).toMatch(/resumed from .* at step \d+/);
    expect(JSON.parse(file('killed', META_FILE).toString()).step).toBe(STEPS);
    // the same tensors and metadata; the files' bytes differ in each save's id alone
    for (const name of [MODEL_FILE, OPTIMIZER_FILE])
      expect(sameContents(parseSafetensors(file('killed', name)), parseSafetensors(file('straight', name))), name).toBe(
        true,
      );
  });
});
