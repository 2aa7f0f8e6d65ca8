import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explainWorld, runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript as child } from './child-script.js';

/**
 * FSDP checkpoint defects found from outside (each failed before its fix). @ddp/nn's and
 * @ddp/zero's checkpoints are tested in those packages.
 */
describe('FSDP checkpoints', () => {
  // manifest.json was plain JSON: a flipped bit in its step, a learning rate or a beta loaded
  // silently (here step 5 → 7). Now sealed with a CRC-32 like nn's and zero's (version 2), and a
  // version-2 checkpoint's safetensors must carry their checksums.
  it('fsdp: a bit flipped in manifest.json is ShardedCheckpointError naming it, on every rank', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'damaged-fsdp-'));
    try {
      const script = child('fsdp-flipped-manifest.child.ts');
      const run = await runWorld<{ rank: number; error: string | null; step: number | null }>({
        script,
        nprocs: 2,
        args: [dir],
      });
      for (const r of run.results)
        expect(r.error ?? `loaded step ${r.step}`, `rank ${r.rank}`).toMatch(
          /^ShardedCheckpointError: .*manifest\.json fails its checksum/,
        );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);

  // A script that ended right after its last async save (destroyProcessGroup without awaiting
  // `done`) tore down the save's group: nothing committed, exit 0, the final checkpoint lost
  // without a word. destroyProcessGroup now waits for a save in flight.
  it('fsdp: an async save in flight at destroyProcessGroup is committed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inflight-fsdp-'));
    try {
      // the ranks print no RESULT: they exit while the save is in flight
      const script = child('fsdp-async-exit.child.ts');
      const run = await runWorld({ script, nprocs: 2, args: [dir], allowFailure: true });
      const committed = (await readdir(dir)).some((name) => name.endsWith('-step-2'));
      expect(run.exitCode, explainWorld(run)).toBe(0);
      expect(committed, 'step 2 committed').toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
