import { mkdir, mkdtemp, readdir, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
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
import { LATEST_LINK } from './checkpoint-dir.js';
import { CheckpointError } from './checkpoint-errors.js';
import { Generator } from './generator.js';
import { WarmupCosineLR } from './lr-scheduler.js';
import { Module } from './module.js';
import { Adam } from './optim/adam.js';
import { Parameter } from './parameter.js';
import { SafetensorsError } from './safetensors.js';
import { Toy, trainSteps } from './test/checkpoint-toy.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-ckpt-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const bits = (t: tf.Tensor) => Array.from(new Uint32Array(Float32Array.from(t.dataSync()).buffer));

describe('checkpoints', () => {
  it('round-trips model, optimizer and generator bit for bit', async () => {
    const gen = new Generator(5);
    const model = new Toy(gen);
    const opt = new Adam(model.parameters(), { lr: 0.01 });
    const sched = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 10 });
    trainSteps(model, opt, gen, 3);
    for (let i = 0; i < 3; i++) sched.step();
    const path = join(dir, 'ckpt');
    const contents = {
      model,
      optimizer: opt,
      scheduler: sched,
      step: 3,
      epoch: 1,
      generator: gen,
      extra: { note: 'x' },
    };
    await saveCheckpoint(path, contents);
    await saveCheckpoint(path, contents); // overwrite
    expect((await readdir(dir)).sort()).toEqual(['ckpt']);
    expect((await readdir(path)).sort()).toEqual(['00000002-step-3', LATEST_LINK]);
    expect(await latestCheckpoint(path)).toBe(join(path, '00000002-step-3'));

    const gen2 = new Generator(99);
    const restored = new Toy(gen2);
    const opt2 = new Adam(restored.parameters(), { lr: 0.5 });
    const sched2 = new WarmupCosineLR(opt2, { warmupSteps: 2, totalSteps: 10 });
    const before = tf.memory().numTensors;
    const info = await loadCheckpoint(path, { model: restored, optimizer: opt2, generator: gen2, scheduler: sched2 });
    expect(tf.memory().numTensors - before).toBe(4); // the new optimizer's moments; model tensors were replaced
    expect(info).toMatchObject({ step: 3, epoch: 1, extra: { note: 'x' } });
    for (const [k, t] of model.stateDict()) expect(bits(restored.stateDict().get(k) as tf.Tensor), k).toEqual(bits(t));
    expect(sched2.lastEpoch).toBe(3);
    expect(opt2.paramGroups[0]?.lr).toBe(opt.paramGroups[0]?.lr);
    expect(opt2.paramGroups[0]?.initialLr).toBe(0.01);
    const a = opt.stateDict();
    const b = opt2.stateDict();
    for (const [i, s] of a.state) {
      expect(b.state.get(i)?.step).toBe(s.step);
      for (const key of ['expAvg', 'expAvgSq'])
        expect(bits(b.state.get(i)?.[key] as tf.Tensor)).toEqual(bits(s[key] as tf.Tensor));
    }
    // Training on from both gives identical weights: generator and optimizer state came back too.
    trainSteps(model, opt, gen, 2);
    trainSteps(restored, opt2, gen2, 2);
    for (const [k, t] of model.stateDict()) expect(bits(restored.stateDict().get(k) as tf.Tensor), k).toEqual(bits(t));
    for (const m of [model, restored]) m.dispose();
    opt.dispose();
    opt2.dispose();
  });

  it('writes safetensors files other tools can read: parsed here from the spec', async () => {
    const gen = new Generator(1);
    const model = new Toy(gen);
    const opt = new Adam(model.parameters());
    trainSteps(model, opt, gen, 1);
    const path = join(dir, 'spec');
    await saveCheckpoint(path, { model, optimizer: opt });
    const readHeader = async (file: string) => {
      const bytes = new Uint8Array(await readFile(join(path, LATEST_LINK, file)));
      const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
      return { bytes, n, header: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) };
    };
    const { bytes, n, header } = await readHeader(MODEL_FILE);
    expect(header.weight).toEqual({ dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] });
    expect(header.bias).toEqual({ dtype: 'F32', shape: [2], data_offsets: [24, 32] });
    expect(header.count).toEqual({ dtype: 'I32', shape: [1], data_offsets: [32, 36] });
    const view = new DataView(bytes.buffer, bytes.byteOffset + 8 + n);
    const weight = Array.from({ length: 6 }, (_, i) => view.getFloat32(4 * i, true));
    expect(weight).toEqual(Array.from(model.weight.dataSync()));
    expect(view.getInt32(32, true)).toBe(3);
    const optFile = await readHeader(OPTIMIZER_FILE);
    const names = ['__metadata__', 'state.0.expAvg', 'state.0.expAvgSq', 'state.1.expAvg', 'state.1.expAvgSq'];
    expect(Object.keys(optFile.header).sort()).toEqual(names);
    expect(optFile.header['state.0.expAvg'].shape).toEqual([2, 3]);
    model.dispose();
    opt.dispose();
  });

  it('a save that fails midway leaves the previous checkpoint whole and no temporaries', async () => {
    const gen = new Generator(3);
    const model = new Toy(gen);
    const path = join(dir, 'crash');
    await saveCheckpoint(path, { model, step: 1 });
    const broken = new Toy(gen);
    broken.bias.dispose(); // reading its state dict now throws midway through the save
    await expect(saveCheckpoint(path, { model: broken, step: 2 })).rejects.toThrow();
    expect((await readdir(dir)).filter((f) => f.startsWith('crash'))).toEqual(['crash']);
    expect((await readdir(path)).sort()).toEqual(['00000001-step-1', LATEST_LINK]);
    const restored = new Toy(new Generator(4));
    expect((await loadCheckpoint(path, { model: restored })).step).toBe(1);
    expect(Array.from(restored.weight.dataSync())).toEqual(Array.from(model.weight.dataSync()));
    for (const m of [model, broken, restored]) m.dispose();
  });

  it('loads the old single-directory layout, and the next save replaces its files', async () => {
    const gen = new Generator(6);
    const model = new Toy(gen);
    const path = join(dir, 'legacy');
    await saveCheckpoint(path, { model, step: 4 });
    // rewrite as the old layout: the files directly in the directory
    const entry = (await latestCheckpoint(path)) as string;
    for (const f of await readdir(entry)) await rename(join(entry, f), join(path, f));
    await rm(entry, { recursive: true });
    await rm(join(path, LATEST_LINK));
    const restored = new Toy(new Generator(7));
    expect(await loadCheckpoint(path, { model: restored })).toMatchObject({ step: 4, path });
    expect(bits(restored.weight.data)).toEqual(bits(model.weight.data));
    await saveCheckpoint(path, { model, step: 5 });
    expect((await readdir(path)).sort()).toEqual(['00000001-step-5', LATEST_LINK]);
    for (const m of [model, restored]) m.dispose();
  });

  it("keeps the user's own files beside the entries (was: every *.safetensors there deleted by a save or load)", async () => {
    const model = new Toy(new Generator(9));
    const path = join(dir, 'shared');
    await mkdir(path, { recursive: true });
    // weights a user keeps in the checkpoint directory: not the old layout (no checkpoint.json beside them)
    await writeFile(join(path, 'pretrained.safetensors'), 'not ours');
    await writeFile(join(path, MODEL_FILE), 'not ours either');
    await saveCheckpoint(path, { model, step: 1 });
    await loadCheckpoint(path, { model });
    await saveCheckpoint(path, { model, step: 2 });
    expect((await readdir(path)).sort()).toEqual([
      '00000002-step-2',
      LATEST_LINK,
      MODEL_FILE,
      'pretrained.safetensors',
    ]);
    model.dispose();
  });

  it("finds the old layout's crash leftovers (newest metadata first); the next save removes them", async () => {
    const gen = new Generator(8);
    const model = new Toy(gen);
    const path = join(dir, 'oldcrash');
    // the old save killed between its renames: the previous checkpoint at .old-*, the new one at .tmp-*
    const dead = 4194301; // a pid no process has here
    for (const [step, name] of [
      [1, `oldcrash.old-${dead}-aaaa`],
      [2, `oldcrash.tmp-${dead}-bbbb`],
    ] as const) {
      await saveCheckpoint(join(dir, name), { model, step });
      const entry = (await latestCheckpoint(join(dir, name))) as string;
      for (const f of await readdir(entry)) await rename(join(entry, f), join(dir, name, f));
      await rm(entry, { recursive: true });
      await rm(join(dir, name, LATEST_LINK));
      await utimes(join(dir, name, META_FILE), 1000 * step, 1000 * step);
    }
    const newer = join(dir, `oldcrash.tmp-${dead}-bbbb`);
    expect(await loadCheckpoint(path, { model })).toMatchObject({ step: 2, path: newer });
    await saveCheckpoint(path, { model, step: 3 });
    expect((await readdir(dir)).filter((f) => f.startsWith('oldcrash'))).toEqual(['oldcrash']);
    model.dispose();
  });

  it('refuses to restore an optimizer, scheduler or generator the checkpoint does not hold', async () => {
    const gen = new Generator(3);
    const model = new Toy(gen);
    const path = join(dir, 'model-only');
    await saveCheckpoint(path, { model, step: 4 });
    const opt = new Adam(model.parameters(), { lr: 0.1 });
    const sched = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 10 });
    // before: the scheduler and generator were skipped silently, so a resumed run restarted its warm-up
    for (const [what, extra] of [
      ['optimizer', { optimizer: opt }],
      ['scheduler', { scheduler: sched }],
      ['generator', { generator: new Generator(1) }],
    ] as const) {
      await expect(loadCheckpoint(path, { model, ...extra }), what).rejects.toThrow(
        new RegExp(`${path}/\\S+ holds no ${what} state`),
      );
    }
    await expect(loadCheckpoint(path, { model, scheduler: sched, generator: gen })).rejects.toThrow(
      /holds no generator, scheduler state/,
    );
    expect(sched.lastEpoch).toBe(0);
    expect((await loadCheckpoint(path, { model })).step).toBe(4);
    model.dispose();
    opt.dispose();
  });

  it('refuses an optimizer whose parameters come in another order than when saved (same shapes)', async () => {
    /** Two layers of one shape, registered in either order: a refactor that keeps every name. */
    class Pair extends Module {
      constructor(gen: Generator, swapped: boolean) {
        super();
        for (const name of swapped ? ['b', 'a'] : ['a', 'b'])
          this.registerParameter(name, Parameter.fromValues(gen.normal(4), [2, 2]));
      }
      forward(): never {
        throw new Error('not used');
      }
    }
    const gen = new Generator(9);
    const saved = new Pair(gen, false);
    const opt = new Adam(saved.parameters(), { lr: 0.01 });
    for (const p of saved.parameters()) p.grad = tf.tensor(gen.normal(p.size), p.shape);
    opt.step();
    const path = join(dir, 'order');
    await saveCheckpoint(path, { model: saved, optimizer: opt });
    // before: loaded, a's Adam moments given to b and b's to a (the model itself loads by name)
    const swapped = new Pair(new Generator(1), true);
    const swappedOpt = new Adam(swapped.parameters(), { lr: 0.01 });
    await expect(loadCheckpoint(path, { model: swapped, optimizer: swappedOpt })).rejects.toThrow(
      /in another order than when saved \(parameter 0 is 'b', was 'a'; parameter 1 is 'a', was 'b'\)/,
    );
    // groups built in another order (no-decay group first) are the same mistake
    const regrouped = new Pair(new Generator(1), false);
    const [a, b] = regrouped.parameters();
    const regroupedOpt = new Adam([{ params: [b as Parameter] }, { params: [a as Parameter], weightDecay: 0.1 }]);
    await expect(loadCheckpoint(path, { model: regrouped, optimizer: regroupedOpt })).rejects.toThrow(CheckpointError);
    const same = new Pair(new Generator(1), false);
    const sameOpt = new Adam(same.parameters(), { lr: 0.01 });
    await loadCheckpoint(path, { model: same, optimizer: sameOpt });
    const moments = (o: Adam) => [...o.state.values()].map((st) => bits(st.expAvg as tf.Tensor));
    expect(moments(sameOpt)).toEqual(moments(opt));
    for (const x of [saved, swapped, regrouped, same]) x.dispose();
    for (const o of [opt, swappedOpt, regroupedOpt, sameOpt]) o.dispose();
  });

  it('reports truncated files, and missing checkpoints clearly', async () => {
    const gen = new Generator(2);
    const model = new Toy(gen);
    const path = join(dir, 'bad');
    await saveCheckpoint(path, { model });
    const file = join(path, LATEST_LINK, MODEL_FILE);
    const full = await readFile(file);
    await writeFile(file, full.subarray(0, full.length - 5));
    await expect(loadCheckpoint(path, { model })).rejects.toThrow(SafetensorsError);
    await expect(loadCheckpoint(path, { model })).rejects.toThrow(
      /model\.safetensors: tensor '\w+' ends at byte \d+ of the data, which has only 31/,
    );
    await expect(loadCheckpoint(join(dir, 'nowhere'), { model })).rejects.toThrow(CheckpointError);
    model.dispose();
  });
});
