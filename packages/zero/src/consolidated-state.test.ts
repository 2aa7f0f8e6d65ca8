import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, loadCheckpoint, saveCheckpoint } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZeroError } from './errors.js';
import { lossOf, makeModel } from './test/model.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

let dir = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  dir = await mkdtemp(join(tmpdir(), 'zero-consolidated-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(dir, { recursive: true, force: true });
});

describe('a consolidated state dict goes stale once the optimizer steps or loads', () => {
  it('stateDict() after a later step raises ZeroError instead of returning the old state', async () => {
    const model = makeModel();
    const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 0.01 });
    const step = async (t: number) => {
      const loss = tidy(() => lossOf(model, t, 0));
      await loss.backward();
      loss.dispose();
      await zero.step();
      zero.zeroGrad();
    };
    await step(0);
    await zero.consolidateStateDict();
    expect(zero.stateDict().state.get(0)?.step).toBe(1);
    await step(1);
    // before: step 1's state with step 2's weights, saved without a word (a checkpoint that cannot resume exactly)
    expect(() => zero.stateDict()).toThrow(ZeroError);
    await expect(saveCheckpoint(dir, { model, optimizer: zero, step: 2 })).rejects.toThrow(/no consolidated state/);
    await zero.consolidateStateDict();
    await saveCheckpoint(dir, { model, optimizer: zero, step: 2 });
    expect(zero.stateDict().state.get(0)?.step).toBe(2);
    await loadCheckpoint(dir, { model, optimizer: zero });
    expect(() => zero.stateDict()).toThrow(ZeroError); // loading replaces the state too
    const before = tf.memory().numTensors;
    await zero.consolidateStateDict();
    await step(2);
    expect(tf.memory().numTensors).toBeLessThanOrEqual(before); // the stale copy is freed, not kept
    zero.dispose();
    model.dispose();
  });
});
