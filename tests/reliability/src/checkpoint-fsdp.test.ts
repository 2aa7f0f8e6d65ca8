import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { explain, runWorld } from './world.js';

/**
 * FSDP checkpoint defects (@ddp/fsdp is owned elsewhere): expected failures until the fix each
 * names lands. @ddp/nn's and @ddp/zero's checkpoints are tested in those packages.
 */
describe('FSDP checkpoints', () => {
  // @ddp/fsdp (fsdp): manifest.json is written as plain JSON, so a flipped bit in its step, a
  // learning rate or a beta loads silently (here step 5 → 7: the resumed run skips two steps of its
  // schedule). nn and zero seal theirs. Fix: checkpoint-save.ts writes `sealJson({ ...manifest })`
  // (@ddp/nn) with `version: 2`; checkpoint-load.ts reads it with
  // `readSealedJson(path, 'ddp-fsdp-sharded-checkpoint', 2)` (a SealedJsonError becomes
  // ShardedCheckpointError naming the file) and passes `{ requireChecksums: manifest.version === 2 }`
  // to every loadSafetensors. (The shards' metadata — Adam's step — is already checksummed by nn.)
  it.fails('fsdp: a bit flipped in manifest.json is ShardedCheckpointError naming it, on every rank', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'damaged-fsdp-'));
    try {
      const run = await runWorld('fsdp-flipped-manifest.child.ts', 2, { timeoutMs: 60_000, args: [dir] });
      expect(run.result.exitCode, explain(run)).toBe(0);
      for (const r of run.out.last(2) as { rank: number; error: string | null; step: number | null }[])
        expect(r.error ?? `loaded step ${r.step}`, `rank ${r.rank}`).toMatch(
          /^ShardedCheckpointError: .*manifest\.json fails its checksum/,
        );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);

  // @ddp/fsdp (fsdp): AsyncCheckpointer.save swallows the background save's failure
  // (`done.catch(() => {})`) until the next save or wait(). A script that ends after its last
  // save — `destroyProcessGroup()` without awaiting `done` — tears down the save's group; the save
  // fails, nothing is committed (correctly: step 1 stays latest) and the process exits 0: the final
  // checkpoint is lost without a word. Fix: have destroyProcessGroup wait for saves in flight (a
  // before-destroy hook in comm that AsyncCheckpointer registers while one is in flight), and report a
  // failed save nobody awaited (a warning and `process.exitCode = 1`).
  it.fails('fsdp: an async save in flight at destroyProcessGroup is committed, or the run fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inflight-fsdp-'));
    try {
      const run = await runWorld('fsdp-async-exit.child.ts', 2, { timeoutMs: 60_000, args: [dir] });
      const committed = (await readdir(dir)).some((name) => name.endsWith('-step-2'));
      expect(committed || run.result.exitCode !== 0, `exit ${run.result.exitCode}, step 2 not committed`).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
