import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '@ddp/comm';
import { Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allReduceGradients } from './index.js';

let group: ProcessGroup;
beforeAll(async () => {
  group = await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

describe('allReduceGradients', () => {
  it('leaves a frozen parameter without gradient (was: zeros, which weight decay and momentum then stepped)', async () => {
    const frozen = new Parameter(tf.ones([2]), false);
    const trained = new Parameter(tf.ones([3]));
    const idle = new Parameter(tf.ones([1])); // trainable, no gradient this step on any replica: keeps none
    trained.grad = tf.tensor1d([1, 2, 3]);
    await allReduceGradients([frozen, trained, idle], group);
    expect(frozen.grad).toBeNull();
    expect(Array.from(trained.grad.dataSync())).toEqual([1, 2, 3]);
    expect(idle.grad).toBeNull();
    // a reused buffer is sized by the parameters that require grad
    await allReduceGradients([frozen, trained, idle], group, new Float32Array(4));
    await expect(allReduceGradients([frozen, trained, idle], group, new Float32Array(6))).rejects.toThrow(RangeError);
    for (const p of [frozen, trained, idle]) p.dispose();
  });
});
