import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { Generator } from './generator.js';
import { WarmupCosineLR } from './lr-scheduler.js';
import { Adam } from './optim/adam.js';
import { Toy, trainSteps } from './test/checkpoint-toy.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-snapshot-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const values = (t: tf.Tensor | number | undefined) => (t instanceof tf.Tensor ? Array.from(t.dataSync()) : t);

/** Everything a checkpoint holds, as plain values. */
function stateOf(model: Toy, opt: Adam, gen: Generator, sched: WarmupCosineLR) {
  return {
    model: [...model.stateDict()].map(([k, t]) => [k, values(t)]),
    optimizer: [...opt.stateDict().state].map(([i, s]) => [i, Object.entries(s).map(([k, v]) => [k, values(v)])]),
    lr: opt.paramGroups[0]?.lr,
    generator: gen.getState(),
    scheduler: sched.lastEpoch,
  };
}

describe('saveCheckpoint while training goes on', () => {
  it('writes the state of the moment it was called, not a mix of the steps taken while it wrote', async () => {
    const gen = new Generator(5);
    const model = new Toy(gen);
    const opt = new Adam(model.parameters(), { lr: 0.01 });
    const sched = new WarmupCosineLR(opt, { warmupSteps: 2, totalSteps: 50 });
    trainSteps(model, opt, gen, 3);
    for (let i = 0; i < 3; i++) sched.step();
    const extra = { samplesSeen: 96 };
    const atSave = stateOf(model, opt, gen, sched);
    const path = join(dir, 'ckpt');
    const saving = saveCheckpoint(path, { model, optimizer: opt, scheduler: sched, generator: gen, step: 3, extra });
    // the training loop goes on without awaiting the save (as an overlapped save would)
    let stepsWhileSaving = 0;
    let saved = false;
    void saving.then(() => {
      saved = true;
    });
    while (!saved) {
      trainSteps(model, opt, gen, 1);
      sched.step();
      extra.samplesSeen += 32;
      stepsWhileSaving++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(stepsWhileSaving).toBeGreaterThan(1);

    const restoredGen = new Generator(99);
    const restored = new Toy(restoredGen);
    const restoredOpt = new Adam(restored.parameters(), { lr: 0.5 });
    const restoredSched = new WarmupCosineLR(restoredOpt, { warmupSteps: 2, totalSteps: 50 });
    const info = await loadCheckpoint(path, {
      model: restored,
      optimizer: restoredOpt,
      generator: restoredGen,
      scheduler: restoredSched,
    });
    expect(info).toMatchObject({ step: 3, extra: { samplesSeen: 96 } });
    expect(stateOf(restored, restoredOpt, restoredGen, restoredSched)).toEqual(atSave);
    model.dispose();
    restored.dispose();
  });
});
