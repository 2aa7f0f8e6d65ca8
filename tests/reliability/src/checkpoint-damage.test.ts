import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { explain, runWorld } from './world.js';

/**
 * Damaged checkpoints of packages owned elsewhere; @ddp/nn's and @ddp/zero's are tested there
 * (nn `checkpoint-bitflip.test.ts`, zero `sharded-checkpoint.multiprocess.test.ts`).
 */
describe('damaged checkpoints in packages owned elsewhere', () => {
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
});
