import { copyFile, mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Generator, Linear, sealJson } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MANIFEST_FILE,
  MODEL_FILE,
  ShardedCheckpointError,
  saveShardedCheckpoint,
  shardFile,
} from './sharded-checkpoint.js';
import { latestShardedCheckpoint, loadShardedCheckpoint } from './sharded-checkpoint-load.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

let root = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  root = await mkdtemp(join(tmpdir(), 'zero-binding-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(root, { recursive: true, force: true });
});

/** Adam over a Linear drawn from `seed`, one step taken, saved at `step` into `dir`; returns the entry. */
async function saved(dir: string, seed: number, step: number): Promise<string> {
  const model = new Linear(5, 3, { generator: new Generator(seed) });
  const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
  for (const p of model.parameters()) p.grad = tf.onesLike(p.data);
  await zero.step();
  const entry = await saveShardedCheckpoint(dir, { model, optimizer: zero, step });
  zero.dispose();
  model.dispose();
  return entry;
}

async function loadError(dir: string): Promise<ShardedCheckpointError | null> {
  const model = new Linear(5, 3);
  const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
  try {
    await loadShardedCheckpoint(dir, { model, optimizer: zero });
    return null;
  } catch (error) {
    return error as ShardedCheckpointError;
  } finally {
    zero.dispose();
    model.dispose();
  }
}

// before the save's id, each of these loaded with no error: one run's weights beside another's moments
describe('a sharded entry whose files come from different saves', () => {
  const cases: [string, string, number, number][] = [
    ['the model from another run at the same step', MODEL_FILE, 2, 4],
    ["a rank's optimizer shard from another step", shardFile(0, 1), 1, 5],
    ['the manifest from another run at the same step', MANIFEST_FILE, 2, 4],
  ];
  it.each(cases)('%s is refused, naming the file', async (_, file, seed, step) => {
    const dir = join(root, `swap-${file}`);
    const entry = await saved(dir, 1, 4);
    const other = await saved(join(root, `other-${file}`), seed, step);
    await copyFile(join(other, file), join(entry, file));
    const error = await loadError(dir);
    expect(error).toBeInstanceOf(ShardedCheckpointError);
    expect(error?.message).toContain('was written by another save than its manifest.json');
    // a foreign manifest disowns the first file read, the shard
    expect(error?.file).toBe(join(entry, file === MANIFEST_FILE ? shardFile(0, 1) : file));
  });

  it("an entry's manifest of another step is refused", async () => {
    const dir = join(root, 'renamed');
    const entry = await saved(dir, 1, 4);
    await rename(entry, entry.replace(/step-4$/, 'step-7'));
    const error = await loadError(dir);
    expect(error).toBeInstanceOf(ShardedCheckpointError);
    expect(error?.message).toContain("its manifest.json is of step 4, the entry's name says step 7");
  });

  it('the entry as saved loads', async () => {
    const dir = join(root, 'intact');
    await saved(dir, 1, 4);
    expect(await loadError(dir)).toBeNull();
  });
});

// before, only nn had one: a script resuming "if there is a checkpoint" had to take a load's error for "none"
describe('latestShardedCheckpoint', () => {
  it('is null for an empty directory, the entry after a save, and refuses an FSDP entry there', async () => {
    const dir = join(root, 'latest');
    expect(await latestShardedCheckpoint(dir)).toBeNull();
    const entry = await saved(dir, 1, 3);
    expect(await latestShardedCheckpoint(dir)).toBe(entry);
    const fsdp = join(dir, '00000009-step-3');
    await mkdir(fsdp);
    await writeFile(join(fsdp, MANIFEST_FILE), sealJson({ format: 'ddp-fsdp-sharded-checkpoint', version: 2 }));
    await expect(latestShardedCheckpoint(dir)).rejects.toThrow(/is not a ddp-zero-sharded-checkpoint/);
  });
});

// before, every save there failed (ENOENT: the temporary entry's name was cut out of the normalised
// path, one character off) and left an empty directory behind each time
describe('a checkpoint directory written with a trailing slash, ./ or a doubled slash', () => {
  it.each([
    ['a trailing slash', () => `${join(root, 'trailing')}/`],
    ['./ in front', () => `./${relative(process.cwd(), join(root, 'dot'))}`],
    ['a doubled slash', () => `${root}//doubled`],
  ])('%s: saves, loads, and leaves only the entry', async (_, dir) => {
    const entry = await saved(dir(), 1, 2);
    expect(await loadError(dir())).toBeNull();
    expect((await readdir(dir())).filter((n) => n !== 'latest')).toEqual([entry.split('/').at(-1)]);
  });
});
