import { fromTf, markGradientShard, markParameterShard } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, AdamW, Linear } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ShardedCheckpointError, ZeroError } from './errors.js';
import { zeroDiffers } from './same-parameters.js';
import { saveShardedCheckpoint } from './sharded-checkpoint.js';
import { loadShardedCheckpoint } from './sharded-checkpoint-load.js';
import { ZeroRedundancyOptimizer } from './zero-redundancy-optimizer.js';

beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
});
afterAll(async () => {
  await destroyProcessGroup();
});

it('refuses options it does not know, and a boolean option given a string (truthy: taken as true)', () => {
  const params = () => new Linear(3, 2).parameters();
  const make = (zero: object) => () => new ZeroRedundancyOptimizer(params(), Adam, { lr: 0.01 }, zero as never);
  expect(make({ overlap_with_ddp: true })).toThrow(/ZeroRedundancyOptimizer: unknown option "overlap_with_ddp"/);
  expect(make({ parametersAsBucketView: 'false' })).toThrow(ZeroError);
  expect(make({ parametersAsBucketView: 'false' })).toThrow(
    'ZeroRedundancyOptimizer: parametersAsBucketView must be a boolean, got "false"',
  );
  // null is what newGroup gives a rank outside the group: it was taken for the world
  expect(make({ processGroup: null })).toThrow(
    'ZeroRedundancyOptimizer: processGroup is null, what newGroup gives a rank outside the group',
  );
});

// probe X: not awaited, zeroGrad cleared the gradients before the local step read them: no step, silently
it('zeroGrad while a step not awaited runs: refused; awaited, the step happened', async () => {
  const layer = new Linear(3, 2);
  const opt = new ZeroRedundancyOptimizer(layer.parameters(), Adam, { lr: 0.1 });
  const before = Array.from(layer.weight.data.dataSync());
  const loss = layer.forward(fromTf(tf.ones([2, 3]))).sum();
  await loss.backward();
  const stepping = opt.step();
  expect(() => opt.zeroGrad()).toThrow(/running ZeroRedundancyOptimizer\.step\(\) \(not awaited\)/);
  await stepping;
  opt.zeroGrad();
  expect(Array.from(layer.weight.data.dataSync())).not.toEqual(before);
});

// probe Z: ZeRO over the tp group of a dp × tp grid advised broadcasting rank 0's parameters, which
// would copy tp rank 0's part of each shard over rank 1's
it("parameters that differ because they are a tensor-parallel shard's parts: named as such", () => {
  const [shard, plain] = [new Linear(2, 2), new Linear(2, 2)].map((l) => l.weight);
  markParameterShard(shard, { ranks: [0, 1], rank: 0 });
  expect(zeroDiffers([plain, shard])(0, 1, 0, 1).message).toMatch(
    /^rank 0: parameter 1 is a tensor-parallel shard \(here part of ranks \[0,1\]\), .*data-parallel group/,
  );
  expect(zeroDiffers([plain, shard])(0, 0, 0, 1).message).toMatch(/parameter 0 differs between ranks 0 and 1/);
});

// probe AD: ZeRO over FSDP's shards took their parts for differing replicas and advised broadcasting rank 0's
it("parameters whose parts ranks of ZeRO's group hold (FSDP's shards): refused when made, naming FSDP", () => {
  const pair = { rank: 0, size: 2, ranks: [0, 1], allReduce: () => ({ wait: () => Promise.resolve() }) };
  const [whole, shard] = [new Linear(2, 2), new Linear(2, 2)].map((l) => l.weight);
  markGradientShard(shard, pair);
  const make = () => new ZeroRedundancyOptimizer([whole, shard], Adam, { lr: 0.01 }, { processGroup: pair as never });
  expect(make).toThrow(ZeroError);
  expect(make).toThrow(
    /parameter 1 is a shard whose parts ranks of its group hold \(FSDP's.*give it a plain optimizer/,
  );
});

// probe AE: torch's names were kept beside the wrapped optimizer's and ignored (weight decay off), silently
it("a state dict of torch's names: refused as the wrapped optimizer refuses it", () => {
  const zero = new ZeroRedundancyOptimizer(new Linear(3, 2).parameters(), Adam, { lr: 0.1 });
  const group = { lr: 0.1, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.05, params: [0, 1] };
  expect(() => zero.loadStateDict({ state: new Map(), paramGroups: [group], kind: 'Adam' } as never)).toThrow(
    /^loadStateDict: Adam parameter group 0: unknown option "weight_decay"; did you mean weightDecay/,
  );
});

// probe BU: ZeRO completed its defaults inside the caller's object: an AdamW built from the same config next
// trained with Adam's weightDecay 0 (torch's AdamW: 0.01), 2.8e-3 off after 50 steps, silently
it("leaves the caller's options object as given; a later optimizer built from it keeps its own defaults", () => {
  const cfg = { lr: 0.01 };
  new ZeroRedundancyOptimizer(new Linear(3, 2).parameters(), Adam, cfg);
  expect(cfg).toEqual({ lr: 0.01 });
  expect(new AdamW(new Linear(3, 2).parameters(), cfg).paramGroups[0].weightDecay).toBe(0.01);
});

// before: a loaded state dict's betas became the group's own array, unfrozen and shared with the caller's dict
it("a loaded state dict's betas: the group's own frozen copy, as the constructor makes them", () => {
  const zero = new ZeroRedundancyOptimizer(new Linear(3, 2).parameters(), Adam, { lr: 0.1 });
  const group = { lr: 0.1, betas: [0.8, 0.9], eps: 1e-8, weightDecay: 0, amsgrad: false, params: [0, 1] };
  const sd = { state: new Map(), paramGroups: [group], kind: 'Adam' };
  zero.loadStateDict(sd as never);
  expect(() => {
    (zero.paramGroups[0].betas as number[])[0] = 0.5;
  }).toThrow(TypeError);
  expect([zero.paramGroups[0].betas, sd.paramGroups[0].betas]).toEqual([
    [0.8, 0.9],
    [0.8, 0.9],
  ]);
});

it("the sharded checkpoint of a plain optimizer: ShardedCheckpointError naming nn's checkpoint (was a TypeError)", async () => {
  const plain = new Adam(new Linear(3, 2).parameters(), { lr: 0.01 });
  const message = /contents\.optimizer must be a ZeroRedundancyOptimizer, got Adam; .*saveCheckpoint/;
  await expect(saveShardedCheckpoint('/nonexistent', { optimizer: plain as never, step: 1 })).rejects.toThrow(message);
  await expect(loadShardedCheckpoint('/nonexistent', { optimizer: plain as never })).rejects.toThrow(
    ShardedCheckpointError,
  );
});
