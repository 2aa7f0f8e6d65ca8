import { cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runWorld } from '@ddp/launch/testing';
import { LATEST_LINK, latestEntry } from '@ddp/nn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANIFEST_FILE } from './sharded-checkpoint.js';

/**
 * Re-saving into a directory that holds a complete checkpoint (step 5), killed with SIGKILL at
 * each point of the save (DDP_CHECKPOINT_CRASH_AT, see @ddp/nn's checkpoint-dir): the step-5
 * checkpoint must stay loadable until the new one (step 7) is committed, and be replaced after.
 */
interface RankResult {
  rank: number;
  maxDiff?: number;
  resumedAt?: number;
}

const script = new URL('./test/sharded-checkpoint.child.ts', import.meta.url);
/** In order; 'shard-written' kills every rank, the others rank 0 (its peer then fails). */
const POINTS = ['shard-written', 'before-commit', 'committed', 'pointer-switched'] as const;
const COMMITTED = new Set<string>(['committed', 'pointer-switched']);
let root = '';
let ckpt = '';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'zero-sharded-crash-'));
  ckpt = join(root, 'ckpt');
  const args = ['--from', '0', '--to', '5', '--save', ckpt];
  await runWorld<RankResult>({ script, nprocs: 2, args, timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const stepOf = async (dir: string) => {
  const entry = await latestEntry(dir, MANIFEST_FILE);
  return entry && (JSON.parse(await readFile(join(entry, MANIFEST_FILE), 'utf8')) as { step: number }).step;
};

describe('sharded checkpoints under SIGKILL mid-save', () => {
  it.each(POINTS)(
    'a re-save killed at %s leaves the newest committed checkpoint loadable',
    async (point) => {
      const dir = join(root, point);
      await cp(ckpt, dir, { recursive: true, verbatimSymlinks: true });
      const run = await runWorld<RankResult>({
        script,
        nprocs: 2,
        args: ['--load', dir, '--to', '7', '--save', dir],
        env: { DDP_CHECKPOINT_CRASH_AT: point },
        allowFailure: true,
        timeoutMs: 60_000,
      });
      expect(run.exitCode).not.toBe(0);
      expect(run.ranks.map((r) => r.signal)).toContain('SIGKILL');
      expect(await stepOf(dir)).toBe(COMMITTED.has(point) ? 7 : 5);
    },
    90_000,
  );

  it('a world resumes from the killed save directory, matches an uninterrupted run, and leaves it clean', async () => {
    const dir = join(root, 'shard-written');
    expect((await readdir(dir)).filter((f) => f.startsWith('.tmp-'))).toHaveLength(1);
    const args = ['--load', dir, '--to', '10'];
    const { results } = await runWorld<RankResult>({ script, nprocs: 2, args, timeoutMs: 90_000 });
    for (const r of results) {
      expect(r.resumedAt).toBe(5);
      expect(r.maxDiff).toBeLessThan(1e-6);
    }
    expect((await readdir(dir)).sort()).toEqual(['00000001-step-5', LATEST_LINK]);
  }, 110_000);
});
