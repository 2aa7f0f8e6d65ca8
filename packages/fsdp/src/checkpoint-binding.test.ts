import { copyFile, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Generator, LayerNorm, Linear, Sequential, sealJson } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { ShardedCheckpointError } from '@ddp/zero';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AsyncCheckpointer } from './checkpoint-async.js';
import { latestFSDPCheckpoint, loadFSDPCheckpoint } from './checkpoint-load.js';
import { MANIFEST_FILE, REPLICATED_FILE, saveFSDPCheckpoint, shardFile } from './checkpoint-save.js';
import { fullyShard } from './fully-shard.js';

let root = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  root = await mkdtemp(join(tmpdir(), 'fsdp-binding-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(root, { recursive: true, force: true });
});

/** A unit (a Linear) under a root holding a frozen LayerNorm (so the replicated file has tensors). */
function run(seed: number) {
  const generator = new Generator(seed);
  const norm = new LayerNorm(4);
  for (const p of norm.parameters()) p.requiresGrad = false;
  const linear = new Linear(3, 4, { generator });
  const model = new Sequential(linear, norm);
  fullyShard(linear);
  const root = fullyShard(model);
  return { root, optimizer: new Adam(root.parameters(), { lr: 0.01 }) };
}

/** One step of `run(seed)`, saved at `step` into `dir`, synchronously or with an AsyncCheckpointer. */
async function saved(dir: string, seed: number, step: number, async = false): Promise<string> {
  const { root, optimizer } = run(seed);
  for (const p of root.parameters()) p.grad = tf.onesLike(p.data);
  optimizer.step();
  if (!async) return saveFSDPCheckpoint(dir, { root, optimizer, step });
  const checkpointer = new AsyncCheckpointer(root);
  const entry = await (await checkpointer.save(dir, { optimizer, step })).done;
  await checkpointer.close();
  return entry;
}

async function loadError(dir: string): Promise<ShardedCheckpointError | null> {
  return loadFSDPCheckpoint(dir, run(1)).then(
    () => null,
    (error: ShardedCheckpointError) => error,
  );
}

// before the save's id, each of these loaded with no error: one run's shards beside another's frozen weights
describe('an FSDP entry whose files come from different saves', () => {
  const cases: [string, string, number, boolean][] = [
    ["a rank's shard from another run at the same step", shardFile(0, 1), 2, false],
    ['the replicated tensors from another step', REPLICATED_FILE, 1, true],
    ['the manifest from another run at the same step', MANIFEST_FILE, 2, true],
  ];
  it.each(cases)('%s is refused, naming the file', async (_, file, seed, async) => {
    const dir = join(root, `swap-${file}`);
    const entry = await saved(dir, 1, 4, async);
    const other = await saved(join(root, `other-${file}`), seed, seed === 1 ? 6 : 4, async);
    await copyFile(join(other, file), join(entry, file));
    const error = await loadError(dir);
    expect(error).toBeInstanceOf(ShardedCheckpointError);
    expect(error?.message).toContain('was written by another save than its manifest.json');
    // a foreign manifest disowns the first file read, the shard
    expect(error?.file).toBe(join(entry, file === MANIFEST_FILE ? shardFile(0, 1) : file));
  });

  it("an entry's manifest of another step is refused; the entry as saved loads", async () => {
    const dir = join(root, 'renamed');
    const entry = await saved(dir, 1, 4);
    expect(await loadError(dir)).toBeNull();
    await rename(entry, entry.replace(/step-4$/, 'step-8'));
    const error = await loadError(dir);
    expect(error).toBeInstanceOf(ShardedCheckpointError);
    expect(error?.message).toContain("its manifest.json is of step 4, the entry's name says step 8");
  });
});

// before, only nn had one: a script resuming "if there is a checkpoint" had to take a load's error for "none"
describe('latestFSDPCheckpoint', () => {
  it('is null for an empty directory, the entry after a save, and refuses a ZeRO entry there', async () => {
    const dir = join(root, 'latest');
    expect(await latestFSDPCheckpoint(dir)).toBeNull();
    const entry = await saved(dir, 1, 3);
    expect(await latestFSDPCheckpoint(dir)).toBe(entry);
    const zero = join(dir, '00000009-step-3');
    await mkdir(zero);
    await writeFile(join(zero, MANIFEST_FILE), sealJson({ format: 'ddp-zero-sharded-checkpoint', version: 2 }));
    await expect(latestFSDPCheckpoint(dir)).rejects.toThrow(/is not a ddp-fsdp-sharded-checkpoint/);
  });
});
