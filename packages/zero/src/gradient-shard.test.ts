import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, getDefaultGroup, initProcessGroup } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GradientSharder } from './gradient-shard.js';
import { lossOf, makeModel } from './test/model.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

describe("stage 2's gradient sharder when the iteration's start fails (EarlyTerminationError, JoinShadowError)", () => {
  it('no reduce goes out for the rest of that backward, and the gradients are those of before it', async () => {
    const model = makeModel();
    const params = model.parameters();
    const group = getDefaultGroup();
    let notices = 0;
    const sharder = new GradientSharder(params, new Map(params.map((p) => [p, 0])), group, () => {
      notices++;
      return Promise.reject(new Error('a rank exhausted its inputs'));
    });
    const before = tf.memory().numTensors;
    for (let epoch = 0; epoch < 2; epoch++) {
      const loss = tidy(() => lossOf(model, epoch, 0));
      // before: a hook after the failure began a new iteration, whose reduce went out alone (the group
      // unusable for good), and owners kept their local gradients into the next epoch (probe DB)
      await expect(loss.backward()).rejects.toThrow('a rank exhausted its inputs');
      loss.dispose();
      expect(notices, `epoch ${epoch}`).toBe(epoch + 1);
      expect(params.map((p) => p.grad)).toEqual(params.map(() => null));
    }
    expect(tf.memory().numTensors).toBe(before);
    sharder.remove();
  });
});
