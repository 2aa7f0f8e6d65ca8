import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runWorld } from '@ddp/launch/testing';
import { sealJson } from '@ddp/nn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Result {
  rank: number;
  resumedAt: number;
  maxDiff: number;
  destroyed: string | null;
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
    'a save into a directory whose newest entry is a ZeRO checkpoint is refused (every rank raises), the entry kept',
    async () => {
      // before: both name their metadata manifest.json, and the FSDP save's clean-up deleted the ZeRO checkpoint
      const dir = join(root, 'beside-zero');
      const zero = join(dir, '00000001-step-100');
      await mkdir(zero, { recursive: true });
      await writeFile(join(zero, 'manifest.json'), sealJson({ format: 'ddp-zero-sharded-checkpoint', version: 2 }));
      const refused = await world(2, { dir, steps: 1, saveSyncAt: 1 });
      expect(refused.exitCode).not.toBe(0);
      const [first, second] = refused.ranks.map((r) => r.stderr.join('\n'));
      // rank 0 tells the others before it throws; under load the launcher, seeing one rank exit, ended the
      // other before its error reached stderr (CI, once each way): each message is asserted whenever its
      // rank had the time, and the rank that exited first always had it
      expect(refused.ranks.some((r) => !r.endedByLauncher)).toBe(true);
      if (!refused.ranks[0].endedByLauncher)
        expect(first).toMatch(
          /CheckpointError: .* is a ddp-zero-sharded-checkpoint, not a ddp-fsdp-sharded-checkpoint/,
        );
      if (!refused.ranks[1].endedByLauncher)
        expect(second).toMatch(
          /ShardedCheckpointError: .*: rank 0 failed to commit the checkpoint \(failed on rank 0:/,
        );
      expect(await readdir(dir)).toContain('00000001-step-100');
    },
    TIMEOUT,
  );

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
      // an optimizer listing the units' shards in another order: each unit's moments still go to it (was:
      // to the unit at the saved position, silently when two units' shards were of one size)
      const reordered = await world(3, { dir, steps: 8, load: true, reverseOrder: true });
      expect(reordered.exitCode).toBe(0);
      for (const r of reordered.results) expect(r.maxDiff).toBeLessThan(1e-5);
      // the superseded step-3 entry is gone; one entry and `latest` remain
      expect((await readdir(dir)).sort()).toEqual(['latest', expect.stringMatching(/step-5$/)].sort());
    },
    2 * TIMEOUT,
  );

  it(
    'a version-2 checkpoint (each unit one flat shard; 2 ranks) resumes on 2 and 3 ranks, in either order of the shards',
    async () => {
      // the per-parameter layout (version 3) must still read what the flat one wrote: step 2 of the same run
      const dir = join(root, 'version-2');
      await cp(new URL('./fixtures/checkpoint-v2', import.meta.url), dir, { recursive: true });
      for (const [nprocs, reverseOrder] of [
        [2, false],
        [3, true],
      ] as const) {
        const resumed = await world(nprocs, { dir, steps: 4, load: true, reverseOrder });
        expect(resumed.exitCode).toBe(0);
        for (const r of resumed.results) {
          expect(r.resumedAt).toBe(2);
          expect(r.maxDiff).toBeLessThan(1e-5);
        }
      }
    },
    2 * TIMEOUT,
  );

  it(
    'saves never awaited, training going on: their entries hold their steps; a sync save after an async one is newer',
    async () => {
      // was: the detached step-3 entry held the state of later steps (each rank another one), and the
      // step-5 sync save was deleted by the step-4 async save's later commit: resumed at 4
      const detached = join(root, 'detached');
      const mixed = join(root, 'mixed');
      const asyncSaves = [
        { at: 3, dir: detached, detached: true },
        { at: 4, dir: mixed },
      ];
      // the sync save not awaited either (was: its collectives met training's on the root's group:
      // CollectiveMismatchError at 2 ranks)
      const saved = await world(2, { dir: mixed, steps: 7, saveSyncAt: 5, syncDetached: true, asyncSaves });
      expect(saved.exitCode).toBe(0);
      for (const [from, at] of [
        [detached, 3],
        [mixed, 5],
      ] as const) {
        const resumed = await world(3, { dir: from, steps: 7, load: true });
        for (const r of resumed.results) {
          expect(r.resumedAt, from).toBe(at);
          expect(r.maxDiff, from).toBeLessThan(1e-5);
        }
      }
    },
    2 * TIMEOUT,
  );

  it(
    "a script's last async save failing (never awaited): destroyProcessGroup raises it on every rank",
    async () => {
      const blocker = join(root, 'a-file');
      await writeFile(blocker, 'not a directory');
      const saved = await world(2, { dir: join(blocker, 'ckpt'), steps: 2, asyncSaves: [{ at: 2, detached: true }] });
      // was: exit code 0, no checkpoint and no message
      for (const r of saved.results) {
        // rank 0 raises its own error (the directory under a file cannot be listed), the others name rank 0
        if (r.rank === 0) expect(r.destroyed).toMatch(/^CheckpointError: cannot list .*a-file\/ckpt: ENOTDIR/);
        else
          expect(r.destroyed).toMatch(/^ShardedCheckpointError: FSDP checkpoint save \(.*\): rank 0 could not create /);
      }
    },
    TIMEOUT,
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

  it(
    'a checkpoint that does not fit the model raises ShardedCheckpointError on every rank (2, and resharded onto 3)',
    async () => {
      const dir = join(root, 'fit');
      const args = (phase: string) => [JSON.stringify({ dir, phase })];
      const script = new URL('./test/checkpoint-fit.child.ts', import.meta.url);
      await runWorld({ script, nprocs: 2, args: args('save'), timeoutMs: TIMEOUT });
      for (const nprocs of [2, 3]) {
        const { results } = await runWorld<{ rank: number; outcomes: Record<string, unknown> }>({
          script,
          nprocs,
          args: args('load'),
          timeoutMs: TIMEOUT,
        });
        for (const { rank, outcomes } of results) {
          const fit = (what: string) => `^ShardedCheckpointError: rank ${rank}: \\S+ does not fit .*: ${what}`;
          expect(outcomes).toEqual({
            'a buffer missing': expect.stringMatching(
              fit('missing 1.running_mean, 1.running_var, 1.num_batches_tracked$'),
            ),
            'a buffer missing (async save)': expect.stringMatching(fit('missing 1.running_mean')),
            'a buffer unexpected': expect.stringMatching(fit('unexpected 1.running_mean')),
            'a buffer of another shape': expect.stringMatching(
              fit('shapes differ: 1.running_mean: checkpoint \\[3\\], model \\[5\\]'),
            ),
            'a shard of another size than the manifest': expect.stringMatching(
              new RegExp(
                `^ShardedCheckpointError: rank ${rank}: \\S+: unit.0.param.0 is float32\\[\\d+\\], ` +
                  "the manifest's chunk",
              ),
            ),
            fits: [1, 2, 3],
            'an Adam checkpoint into SGD': expect.stringMatching(
              /^ShardedCheckpointError: \S+ holds the state of Adam, not of SGD$/,
            ),
            'a scheduler': expect.stringMatching(
              /^ShardedCheckpointError: loadFSDPCheckpoint: an FSDP checkpoint does not keep scheduler;/,
            ),
          });
        }
      }
    },
    3 * TIMEOUT,
  );
});
