import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { markParameterShard } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, CheckpointError, Generator, Linear } from '@ddp/nn';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ShardedCheckpointError, saveShardedCheckpoint } from './sharded-checkpoint.js';
import { loadShardedCheckpoint } from './sharded-checkpoint-load.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

let root = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  root = await mkdtemp(join(tmpdir(), 'zero-parts-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(root, { recursive: true, force: true });
});

/** The tensor-parallel rank `part` of 2 of a layer (its shards have one name and shape on both ranks). */
function tpPart(part: number, inputs = 3) {
  const model = new Linear(inputs, 2, { generator: new Generator(part) });
  for (const p of model.parameters()) markParameterShard(p, { ranks: [0, 1], rank: part });
  return { model, optimizer: new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.1 }) };
}

// probe Z: dp × tp with ZeRO, each tp rank loaded the other's shards (0.98 off), and two parts saving
// into one directory committed in turn, each deleting the other's entry (every save acknowledged)
it("a tensor-parallel part's checkpoint: refused by the other part, and not committed over by it", async () => {
  const [zero, one] = [tpPart(0), tpPart(1)];
  const dir = join(root, 'tp-0');
  await saveShardedCheckpoint(dir, { ...zero, step: 2 });
  const load = loadShardedCheckpoint(dir, one);
  await expect(load).rejects.toThrow(ShardedCheckpointError);
  await expect(load).rejects.toThrow(/holds the shards of part 0 of 2, this model the shards of part 1 of 2/);
  await loadShardedCheckpoint(dir, zero);
  // pipeline stages (other names and shapes) or tp ranks saving one step into one directory
  await expect(saveShardedCheckpoint(dir, { ...one, step: 2 })).rejects.toThrow(CheckpointError);
  await expect(saveShardedCheckpoint(dir, { ...one, step: 2 })).rejects.toThrow(/another part of the model/);
  const stage = new Linear(4, 2);
  const other = { model: stage, optimizer: new ZeroRedundancyOptimizer(stage.parameters(), Adam, { lr: 0.1 }) };
  await expect(saveShardedCheckpoint(dir, { optimizer: other.optimizer, step: 2 })).rejects.toThrow(/another part/);
  expect((await readdir(dir)).filter((n) => n.includes('-step-'))).toHaveLength(1);
  await saveShardedCheckpoint(dir, { ...zero, step: 3 }); // the same part's next step replaces it
});
