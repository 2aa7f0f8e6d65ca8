import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Generator, Module, Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadShardedCheckpoint, ShardedCheckpointError, saveShardedCheckpoint } from './sharded-checkpoint.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

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

let dir = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  dir = await mkdtemp(join(tmpdir(), 'zero-order-'));
  const gen = new Generator(9);
  const model = new Pair(gen, false);
  const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
  for (const p of model.parameters()) p.grad = tf.tensor(gen.normal(p.size), p.shape);
  await zero.step();
  await saveShardedCheckpoint(dir, { model, optimizer: zero, step: 1 });
  zero.dispose();
  model.dispose();
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(dir, { recursive: true, force: true });
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
    expect((await loadShardedCheckpoint(dir, { model, optimizer: zero })).step).toBe(1);
    expect(zero.optim?.state.size).toBe(2);
    zero.dispose();
    model.dispose();
  });
});
