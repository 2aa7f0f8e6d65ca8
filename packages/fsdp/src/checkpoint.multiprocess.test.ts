import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runWorld } from '@ddp/launch/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Result {
  rank: number;
  resumedAt: number;
  maxDiff: number;
}

const TIMEOUT = 120_000;
let root = '';
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'fsdp-ckpt-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const world = (nprocs: number, args: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) =>
  runWorld<Result>({
    script: new URL('./test/checkpoint.child.ts', import.meta.url),
    nprocs,
    args: [JSON.stringify(args)],
    env,
    timeoutMs: TIMEOUT,
    allowFailure: true,
  });

describe('FSDP sharded checkpoints', () => {
  it(
    'saved on 2 ranks (sync at step 3, async at steps 4 and 5), resumed on 3: equals 8 uninterrupted single-process steps',
    async () => {
      const dir = join(root, 'resume');
      // the step-5 save starts while step 4's may still be writing from the same staging buffers
      const early = join(root, 'resume-step-4');
      const asyncSaves = [{ at: 4, dir: early }, { at: 5 }];
      const saved = await world(2, { dir, steps: 5, saveSyncAt: 3, asyncSaves });
      expect(saved.exitCode).toBe(0);
      for (const [from, at] of [
        [dir, 5],
        [early, 4],
      ] as const) {
        const resumed = await world(3, { dir: from, steps: 8, load: true });
        expect(resumed.exitCode).toBe(0);
        for (const r of resumed.results) {
          expect(r.resumedAt).toBe(at);
          expect(r.maxDiff).toBeLessThan(1e-5);
        }
      }
      // the superseded step-3 entry is gone; one entry and `latest` remain
      expect((await readdir(dir)).sort()).toEqual(['latest', expect.stringMatching(/step-5$/)].sort());
    },
    2 * TIMEOUT,
  );

  it.each(['async:shard-written', 'async:before-commit'])(
    'kill -9 during an async save (%s) leaves the previous checkpoint loadable',
    async (point) => {
      const dir = join(root, point.replace(':', '-'));
      const killed = await world(
        2,
        { dir, steps: 4, saveSyncAt: 2, asyncSaves: [{ at: 4 }] },
        { DDP_CHECKPOINT_CRASH_AT: point },
      );
      expect(killed.exitCode).not.toBe(0);
      expect(killed.ranks.some((r) => r.signal === 'SIGKILL')).toBe(true);
      const resumed = await world(3, { dir, steps: 4, load: true });
      expect(resumed.exitCode).toBe(0);
      for (const r of resumed.results) {
        expect(r.resumedAt).toBe(2);
        expect(r.maxDiff).toBeLessThan(1e-5);
      }
    },
    2 * TIMEOUT,
  );
});
