import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { markParameterShard } from '@ddp/autograd';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { latestCheckpoint, loadCheckpoint, META_FILE, saveCheckpoint } from './checkpoint.js';
import { Generator } from './generator.js';
import { Linear } from './layers/linear.js';
import { readSealedJson, sealJson } from './sealed-json.js';
import { Toy } from './test/checkpoint-toy.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-parts-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const values = (model: Toy) => model.parameters().flatMap((p) => Array.from(p.data.dataSync()));
/** Tensor-parallel rank `rank` of the group `ranks` (its shards: same names and shapes on every rank). */
function shardOf(rank: number, ranks: number[], seed = rank + 5): Toy {
  const model = new Toy(new Generator(seed));
  for (const p of model.parameters()) markParameterShard(p, { ranks, rank });
  return model;
}
const entries = async () => (await readdir(dir)).filter((n) => n !== 'latest').sort();

describe('which part of a model a checkpoint holds', () => {
  // each commit's clean-up removed the entry before it: 4 acknowledged saves, 1 entry left
  it("a tensor-parallel rank saving the same step into a directory holding another rank's part is refused", async () => {
    const first = await saveCheckpoint(dir, { model: shardOf(0, [0, 1]), step: 5 });
    await expect(saveCheckpoint(dir, { model: shardOf(1, [0, 1]), step: 5 })).rejects.toThrow(
      /its newest entry holds step 5 of another part of the model .* Save each model-parallel rank into its own/,
    );
    expect(await latestCheckpoint(dir)).toBe(first);
    expect(await entries()).toEqual(['00000001-step-5']); // and no temporary left
  });

  it('a pipeline stage (other parameter names) alike; replicas of one part, and later steps, commit as before', async () => {
    await saveCheckpoint(dir, { model: new Toy(new Generator(1)), step: 5 });
    await expect(saveCheckpoint(dir, { model: new Linear(3, 2), step: 5 })).rejects.toThrow(
      /another part of the model/,
    );
    // data-parallel replicas of one part save the same tensors: the newer commit replaces the older
    await saveCheckpoint(dir, { model: new Toy(new Generator(1)), step: 5 });
    expect(await entries()).toEqual(['00000002-step-5']);
    const replica = shardOf(0, [2, 3]);
    await saveCheckpoint(join(dir, 'tp'), { model: shardOf(0, [0, 1]), step: 5 });
    await saveCheckpoint(join(dir, 'tp'), { model: replica, step: 5 });
    // another model at a later step is a new run's: it replaces the old as it always did
    await saveCheckpoint(dir, { model: new Linear(3, 2), step: 6 });
    expect(await entries()).toEqual(['00000003-step-6', 'tp']);
  });

  // shards were recorded by global ranks: tp rank 0 of [2,3] was refused tp rank 0 of [0,1]'s identical shards
  it('the same tensor-parallel rank of another data-parallel replica loads the shards, also from an older record', async () => {
    const saved = shardOf(0, [0, 1]);
    const entry = await saveCheckpoint(dir, { model: saved, step: 2 });
    const replica = shardOf(0, [2, 3], 99);
    await loadCheckpoint(dir, { model: replica });
    expect(values(replica)).toEqual(values(saved));
    // the record of a checkpoint saved before: global ranks, no modelPart
    const meta = await readSealedJson(join(entry, META_FILE), 'ddp-checkpoint', 2);
    delete meta.modelPart;
    await writeFile(join(entry, META_FILE), sealJson({ ...meta, parameterShards: 'the shards of rank 0 of [0,1]' }));
    const again = shardOf(0, [2, 3], 98);
    await loadCheckpoint(dir, { model: again });
    expect(values(again)).toEqual(values(saved));
    await expect(loadCheckpoint(dir, { model: shardOf(1, [2, 3]) })).rejects.toThrow(
      /holds the shards of part 0 of 2, this model the shards of part 1 of 2/,
    );
  });

  // a ZeRO sharded checkpoint (manifest.json) and an nn one in one directory: each save deleted the other
  it('a save into a directory whose newest entry is another kind of checkpoint is refused; that entry kept', async () => {
    const sharded = join(dir, '00000001-step-1');
    await mkdir(sharded);
    await writeFile(join(sharded, 'manifest.json'), '{}');
    await expect(saveCheckpoint(dir, { model: new Toy(new Generator(1)), step: 2 })).rejects.toThrow(
      /its newest entry 00000001-step-1 has no checkpoint.json: another kind of checkpoint/,
    );
    expect(await entries()).toEqual(['00000001-step-1']);
  });
});
