import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, CheckpointError, Generator, Linear } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveShardedCheckpoint } from './sharded-checkpoint.js';
import { loadShardedCheckpoint } from './sharded-checkpoint-load.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

let dir = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  dir = await mkdtemp(join(tmpdir(), 'zero-sharing-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(dir, { recursive: true, force: true });
});

/** A run's model and optimizer, one step in (a step makes Adam's state). */
async function run(seed: number) {
  const model = new Linear(3, 2);
  const gen = new Generator(seed);
  const optimizer = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
  for (const p of model.parameters()) p.grad = tf.tensor(gen.normal(p.size), p.shape);
  await optimizer.step();
  return { model, optimizer };
}

describe('saveShardedCheckpoint with expectNewest', () => {
  // before: two runs given one directory each committed and deleted the other's entries, silently
  it("refuses a commit over another run's newest entry, which stays loadable", async () => {
    const a = await run(1);
    const b = await run(2);
    const first = await saveShardedCheckpoint(dir, { ...a, step: 3 }, { expectNewest: null });
    expect(first.startsWith(dir)).toBe(true);
    await expect(saveShardedCheckpoint(dir, { ...b, step: 3 }, { expectNewest: null })).rejects.toThrow(
      CheckpointError,
    );
    // two saves issued back to back expect the same entry: the second finds the first's, this process's own
    const [, second] = await Promise.all([
      saveShardedCheckpoint(dir, { ...a, step: 5 }, { expectNewest: first }),
      saveShardedCheckpoint(dir, { ...a, step: 6 }, { expectNewest: first }),
    ]);
    expect((await readdir(dir)).filter((n) => n.includes('-step-'))).toEqual([second.slice(dir.length + 1)]);

    // a resumed run expects the entry it loaded
    const resumed = await run(3);
    const loaded = await loadShardedCheckpoint(dir, resumed);
    expect(loaded.path).toBe(second);
    await expect(saveShardedCheckpoint(dir, { ...resumed, step: 9 }, { expectNewest: loaded.path })).resolves.toMatch(
      /-step-9$/,
    );
    for (const r of [a, b, resumed]) {
      r.optimizer.dispose();
      r.model.dispose();
    }
  });
});
