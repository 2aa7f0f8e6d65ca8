import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, AdamW, Generator, Module, Parameter, SGD, StepLR, WarmupCosineLR } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardedCheckpointError, saveShardedCheckpoint } from './sharded-checkpoint.js';
import { loadShardedCheckpoint } from './sharded-checkpoint-load.js';
import { type OptimizerClass, ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

/** Two parameters of one shape, registered in either order: a refactor that keeps every name. */
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

const SCHEDULE = { warmupSteps: 2, totalSteps: 10 };
let root = '';
/** Step 3 of Adam over a Pair, with a warm-up schedule and a generator 5 draws in. */
let dir = '';
/** The same, saved without scheduler nor generator. */
let bare = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  root = await mkdtemp(join(tmpdir(), 'zero-contents-'));
  [dir, bare] = [join(root, 'full'), join(root, 'bare')];
  const gen = new Generator(9);
  const model = new Pair(gen, false);
  const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
  const scheduler = new WarmupCosineLR(zero, SCHEDULE);
  for (let t = 0; t < 3; t++) {
    for (const p of model.parameters()) p.grad = tf.tensor(gen.normal(p.size), p.shape);
    await zero.step();
    scheduler.step();
  }
  const generator = new Generator(4);
  generator.normal(5);
  await saveShardedCheckpoint(dir, { model, optimizer: zero, scheduler, generator, step: 3 });
  await saveShardedCheckpoint(bare, { model, optimizer: zero, step: 3 });
  zero.dispose();
  model.dispose();
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(root, { recursive: true, force: true });
});

describe('loadShardedCheckpoint restores the LR schedule and the generator', () => {
  // before: a sharded checkpoint held neither, so a resumed run restarted its warm-up and random stream
  it('continues the schedule at its step and the generator at its offset', async () => {
    const model = new Pair(new Generator(1), false);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const scheduler = new WarmupCosineLR(zero, SCHEDULE);
    const generator = new Generator(4);
    await loadShardedCheckpoint(dir, { model, optimizer: zero, scheduler, generator });
    const reference = new WarmupCosineLR({ paramGroups: [{ lr: 0.01 }] }, SCHEDULE);
    for (let t = 0; t < 3; t++) reference.step();
    expect(scheduler.lastEpoch).toBe(3);
    expect(zero.paramGroups[0].lr).toBe(reference.getLastLr()[0]);
    scheduler.step(); // the lr is the one the scheduler wrote: no SchedulerError
    const drawn = new Generator(4);
    drawn.normal(5);
    expect(generator.getState()).toEqual(drawn.getState());
    zero.dispose();
    model.dispose();
  });

  it('refuses to restore a scheduler or generator the checkpoint does not hold', async () => {
    const model = new Pair(new Generator(1), false);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const scheduler = new WarmupCosineLR(zero, SCHEDULE);
    await expect(loadShardedCheckpoint(bare, { model, optimizer: zero, scheduler })).rejects.toThrow(
      /holds no scheduler state/,
    );
    await expect(
      loadShardedCheckpoint(bare, { model, optimizer: zero, scheduler, generator: new Generator(1) }),
    ).rejects.toThrow(ShardedCheckpointError);
    expect((await loadShardedCheckpoint(bare, { model, optimizer: zero })).step).toBe(3);
    zero.dispose();
    model.dispose();
  });
});

describe('a contents key the checkpoint does not know', () => {
  // a prebuilt { model, optimizer, sched } passed TypeScript: the scheduler was neither saved nor restored
  it('is refused at save and load; step(closure) refused; one object serves save and load', async () => {
    const model = new Pair(new Generator(1), false);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const sched = new WarmupCosineLR(zero, SCHEDULE);
    const state = { model, optimizer: zero, sched, step: 3 } as unknown as Parameters<typeof saveShardedCheckpoint>[1];
    await expect(saveShardedCheckpoint(join(root, 'typo'), state)).rejects.toThrow(/unknown key "sched"/);
    await expect(loadShardedCheckpoint(dir, state)).rejects.toThrow(ShardedCheckpointError);
    expect((await loadShardedCheckpoint(dir, { model, optimizer: zero, step: 0, extra: null })).step).toBe(3);
    await expect((zero.step as (c: unknown) => Promise<void>).call(zero, () => 1)).rejects.toThrow(/takes no argument/);
    zero.dispose();
    model.dispose();
  });
});

describe('loadShardedCheckpoint refuses another optimizer class', () => {
  // the manifest recorded no class: Adam's moments loaded into SGD (with Adam's betas), or AdamW
  // read Adam's L2 decay as decoupled, silently
  it('an Adam checkpoint into ZeRO over SGD or AdamW: ShardedCheckpointError naming both, the model untouched', async () => {
    for (const Other of [SGD, AdamW]) {
      const model = new Pair(new Generator(1), false);
      const zero = new ZeroRedundancyOptimizer(model.parameters(), Other as unknown as OptimizerClass<{ lr: number }>, {
        lr: 0.01,
      });
      const before = model.parameters().map((p) => [...p.data.dataSync()]);
      await expect(loadShardedCheckpoint(dir, { model, optimizer: zero })).rejects.toThrow(
        new RegExp(`holds the state of Adam, not of ${Other.name}`),
      );
      // before anything changes (the optimizer's own check came after the weights were loaded)
      expect(model.parameters().map((p) => [...p.data.dataSync()])).toEqual(before);
      zero.dispose();
      model.dispose();
    }
  });
});

describe('loadShardedCheckpoint keeps each parameter with its own optimizer state', () => {
  // the model loads by name, the optimizer state by position: before, a's Adam moments went to b and b's to a
  it('refuses a model whose parameters are registered in another order than when saved', async () => {
    const model = new Pair(new Generator(1), true);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const load = loadShardedCheckpoint(dir, { model, optimizer: zero });
    await expect(load).rejects.toThrow(ShardedCheckpointError);
    await expect(loadShardedCheckpoint(dir, { model, optimizer: zero })).rejects.toThrow(
      /in another order than when saved \(parameter 0 is 'b', was 'a'; parameter 1 is 'a', was 'b'\)/,
    );
    expect(zero.optim?.state.size).toBe(0); // nothing loaded
    zero.dispose();
    model.dispose();
  });

  it('refuses an optimizer given the parameters in another order', async () => {
    const model = new Pair(new Generator(1), false);
    const [a, b] = model.parameters();
    const zero = new ZeroRedundancyOptimizer([b, a], Adam, { lr: 0.01 });
    await expect(loadShardedCheckpoint(dir, { model, optimizer: zero })).rejects.toThrow(/in another order/);
    zero.dispose();
    model.dispose();
  });

  it('loads the same model in the same order, its state on the right parameters', async () => {
    const model = new Pair(new Generator(1), false);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    expect((await loadShardedCheckpoint(dir, { model, optimizer: zero })).step).toBe(3);
    expect(zero.optim?.state.size).toBe(2);
    zero.dispose();
    model.dispose();
  });
});

// probe AI: the weights were loaded before the optimizer's and the scheduler's checks, so a refused load
// left the model at the checkpoint's weights (a `catch` that starts afresh trained them from step 0)
describe('a load refused for its optimizer or scheduler state changes nothing', () => {
  it('another grouping of the parameters, another schedule: ShardedCheckpointError, the model untouched', async () => {
    const model = new Pair(new Generator(1), false);
    const before = model.parameters().map((p) => Array.from(p.data.dataSync()));
    const [a, b] = model.parameters();
    const grouped = new ZeroRedundancyOptimizer([{ params: [a] }, { params: [b] }], Adam, { lr: 0.01 });
    await expect(loadShardedCheckpoint(dir, { model, optimizer: grouped })).rejects.toThrow(ShardedCheckpointError);
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const scheduler = new StepLR(zero, 2, 0.5);
    await expect(loadShardedCheckpoint(dir, { model, optimizer: zero, scheduler })).rejects.toThrow(
      /state of a WarmupCosineLR, loaded into a StepLR/,
    );
    expect(model.parameters().map((p) => Array.from(p.data.dataSync()))).toEqual(before);
    expect(zero.optim?.state.size ?? 0).toBe(0);
    for (const z of [grouped, zero]) z.dispose();
    model.dispose();
  });
});
