import { markGradientShard, mse, tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { Adam, Generator, Linear } from '@ddp/nn';
import { describe, expect, it } from 'vitest';
import { AdasumOptimizer } from './adasum-optimizer.js';

/** A 2-rank group whose exchange fails, as when the partner is lost (only what Adasum calls). */
const brokenPair = {
  size: 2,
  rank: 0,
  ranks: [0, 1],
  allReduce: () => ({ wait: () => Promise.resolve() }),
  batchIsendIrecv: () => ({ wait: () => Promise.reject(new Error('rank 0: peer 1 lost')) }),
} as unknown as ProcessGroup;

describe('AdasumOptimizer in one process', () => {
  it("a failed combination rejects and leaves the parameters where the step began, not on this rank's own step", async () => {
    const model = new Linear(4, 2, { generator: new Generator(3) });
    const before = model.parameters().map((p) => Array.from(p.data.dataSync()));
    const opt = new AdasumOptimizer(new Adam(model.parameters(), { lr: 0.1 }), brokenPair);
    const loss = mse(model.forward(tensor(new Generator(1).normal(8), [2, 4])), tensor([1, 2, 3, 4], [2, 2]));
    await loss.backward();
    loss.dispose();
    await expect(opt.step()).rejects.toThrow(/peer 1 lost/);
    expect(model.parameters().map((p) => Array.from(p.data.dataSync()))).toEqual(before);
  });

  it('step(closure) is refused before any exchange (ignored where types are not checked: tsx)', async () => {
    const model = new Linear(4, 2, { generator: new Generator(3) });
    const opt = new AdasumOptimizer(new Adam(model.parameters(), { lr: 0.1 }), brokenPair);
    await expect((opt.step as (c: unknown) => Promise<void>).call(opt, () => 1)).rejects.toThrow(/takes no argument/);
  });
});

// probe X: not awaited, zeroGrad cleared the gradients before the local step read them: it never trained
it('AdasumOptimizer: zeroGrad while a step not awaited runs is refused', async () => {
  const model = new Linear(4, 2, { generator: new Generator(3) });
  const opt = new AdasumOptimizer(new Adam(model.parameters(), { lr: 0.1 }), brokenPair);
  const loss = mse(model.forward(tensor(new Generator(1).normal(8), [2, 4])), tensor([1, 2, 3, 4], [2, 2]));
  await loss.backward();
  loss.dispose();
  const stepping = opt.step();
  expect(() => opt.zeroGrad()).toThrow(/running AdasumOptimizer\.step\(\) \(not awaited\)/);
  await expect(stepping).rejects.toThrow(/peer 1 lost/);
});

// probe AD: over FSDP's shards each rank's delta is another part of the parameter, and Adasum combined them as one
it('AdasumOptimizer refuses shards whose parts other ranks of its group hold, and a group that is a Promise', () => {
  const pair = {
    rank: 0,
    size: 2,
    ranks: [0, 1],
    allReduce: () => ({ wait: async () => {} }),
  } as unknown as ProcessGroup;
  const layer = new Linear(2, 2);
  markGradientShard(layer.weight, pair); // what fullyShard marks each shard with
  expect(() => new AdasumOptimizer(new Adam(layer.parameters(), { lr: 0.1 }), pair)).toThrow(
    /parameter 0 is a shard whose parts other ranks of the group hold/,
  );
  const pending = Promise.resolve(pair) as never; // newGroup(…) not awaited
  expect(() => new AdasumOptimizer(new Adam(new Linear(2, 2).parameters(), { lr: 0.1 }), pending)).toThrow(
    /processGroup is a Promise \(await newGroup\(…\) first\)/,
  );
});

// probe AD: ZeRO's step is async and averages the gradients; Adasum read the deltas before it ran (zero)
it('AdasumOptimizer over an optimizer whose step is async (ZeRO): refused when made', () => {
  const model = new Linear(4, 2, { generator: new Generator(3) });
  class ZeroLike extends Adam {
    override async step(): Promise<void> {
      super.step();
    }
  }
  expect(() => new AdasumOptimizer(new ZeroLike(model.parameters(), { lr: 0.1 }), brokenPair)).toThrow(
    /ZeroLike\.step\(\) is asynchronous \(a distributed optimizer\): wrap a local optimizer/,
  );
});
