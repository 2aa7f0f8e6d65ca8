import { copyFile, cp, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  latestCheckpoint,
  loadCheckpoint,
  META_FILE,
  MODEL_FILE,
  OPTIMIZER_FILE,
  saveCheckpoint,
} from './checkpoint.js';
import { sameContents } from './checkpoint-binding.js';
import { CheckpointError } from './checkpoint-errors.js';
import { Linear } from './layers/linear.js';
import { SGD } from './optim/sgd.js';
import { parseSafetensors } from './safetensors-read.js';
import { modelAtStep } from './test/checkpoint-crash-model.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-binding-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A model with optimizer state after one step from the weights of `step`, saved at `step` into `dir`. */
async function saved(dir: string, step: number) {
  const model = modelAtStep(step);
  const optimizer = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
  for (const p of model.parameters()) p.grad = tf.onesLike(p.data);
  optimizer.step();
  const entry = await saveCheckpoint(dir, { model, optimizer, step });
  return { model, optimizer, entry };
}

async function loadError(dir: string, step: number): Promise<Error | null> {
  const { model, optimizer } = await saved(join(root, `scratch-${Math.random()}`), step);
  try {
    await loadCheckpoint(dir, { model, optimizer });
    return null;
  } catch (error) {
    return error as Error;
  } finally {
    model.dispose();
  }
}

// Each file checks itself, but before the save's id a file copied in from another checkpoint (another run at
// the same step, the same run at another step) loaded beside the others with no error: a model of one run
// with the optimizer state of another.
describe('an entry whose files come from different saves', () => {
  const cases: [string, string, number][] = [
    ['the model from another run at the same step', MODEL_FILE, 3],
    ['the optimizer state from another step', OPTIMIZER_FILE, 4],
    [`the ${META_FILE} from another run at the same step`, META_FILE, 3],
  ];
  it.each(cases)('%s is refused, naming the file', async (_, file, otherStep) => {
    const dir = join(root, `swap-${file}-${otherStep}`);
    const { model, entry } = await saved(dir, 3);
    const other = await saved(join(root, `other-${file}-${otherStep}`), otherStep);
    await copyFile(join(other.entry, file), join(entry, file));
    const error = await loadError(dir, 3);
    expect(error).toBeInstanceOf(CheckpointError);
    const culprit = file === META_FILE ? MODEL_FILE : file; // a foreign checkpoint.json disowns the model first
    expect(error?.message).toContain(`${join(entry, culprit)} was written by another save than its ${META_FILE}`);
    for (const m of [model, other.model]) m.dispose();
  });

  it("an entry's checkpoint.json of another step is refused even with its own files", async () => {
    const dir = join(root, 'renamed');
    const { model, entry } = await saved(dir, 5);
    await rename(entry, entry.replace(/step-5$/, 'step-9'));
    const error = await loadError(dir, 5);
    expect(error).toBeInstanceOf(CheckpointError);
    expect(error?.message).toMatch(/step-9: its checkpoint.json is of step 5, the entry's name says step 9/);
    model.dispose();
  });

  it('a whole entry copied from another checkpoint still loads, and so do the untouched ones', async () => {
    const dir = join(root, 'whole');
    const { model } = await saved(dir, 2);
    const other = await saved(join(root, 'whole-other'), 2);
    const [name] = (await readdir(dir)).filter((n) => n.endsWith('-step-2'));
    await rm(join(dir, name), { recursive: true });
    await cp(other.entry, join(dir, name), { recursive: true });
    expect(await loadError(dir, 2)).toBeNull();
    expect(await latestCheckpoint(dir)).toBe(join(dir, name));
    const fresh = new Linear(16, 8);
    await loadCheckpoint(dir, { model: fresh });
    expect(await fresh.parameters()[0].data.array()).toEqual(await other.model.parameters()[0].data.array());
    for (const m of [model, other.model, fresh]) m.dispose();
  });
});

describe('sameContents', () => {
  it('two saves of one state differ in their bytes (the ids), not in their contents; another state differs', async () => {
    const [a, b, c] = await Promise.all([
      saved(join(root, 'same-a'), 2),
      saved(join(root, 'same-b'), 2),
      saved(join(root, 'same-c'), 3),
    ]);
    const read = async (entry: string, file: string) => parseSafetensors(await readFile(join(entry, file)));
    for (const file of [MODEL_FILE, OPTIMIZER_FILE]) {
      const [x, y] = [await readFile(join(a.entry, file)), await readFile(join(b.entry, file))];
      expect(x.equals(y), file).toBe(false);
      expect(sameContents(await read(a.entry, file), await read(b.entry, file)), file).toBe(true);
    }
    // the models differ (the optimizers hold the same momentum: gradients of ones in both)
    expect(sameContents(await read(a.entry, MODEL_FILE), await read(c.entry, MODEL_FILE))).toBe(false);
    for (const m of [a.model, b.model, c.model]) m.dispose();
  });
});
