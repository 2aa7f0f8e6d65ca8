// FSDP's root given to what treats the ranks' copies as replicas (2 ranks): DDP, ZeRO, AdasumOptimizer.
// Prints each one's error; DDP's forward and backward are then tried too.
import { tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard } from '@ddp/fsdp';
import { Adam, Generator, Linear, mse, Sequential, SGD, Tanh } from '@ddp/nn';
import { AdasumOptimizer, DistributedDataParallel } from '@ddp/reducer';
import { ZeroRedundancyOptimizer } from '@ddp/zero';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const gen = new Generator(3);
const model = new Sequential(new Linear(3, 4, { generator: gen }), new Tanh(), new Linear(4, 2, { generator: gen }));
const root = fullyShard(model);
const errors = {
  // the module fullyShard sharded: its parameters are now FSDP's shards
  ddp: await errorOf(async () => {
    const ddp = await DistributedDataParallel.create(model);
    const out = await ddp.forward(rankBatch(group.rank));
    await tidy(() => mse(out, tensor([1, 0, 0, 1], [2, 2]))).backward();
  }),
  // a user's script in plain JavaScript: no type says FSDP's root is not a Module
  ddpOverRoot: await errorOf(async () => void (await DistributedDataParallel.create(root as never))),
  zero: await errorOf(async () => void new ZeroRedundancyOptimizer(root.parameters(), Adam)),
  adasum: await errorOf(async () => void new AdasumOptimizer(new SGD(root.parameters(), { lr: 0.1 }))),
};
console.log(`RESULT ${JSON.stringify({ rank: group.rank, errors })}`);
await destroyProcessGroup();
