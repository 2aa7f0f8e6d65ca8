// One rank of misuse.multiprocess.test.ts: argv = stage, init ('alike': every rank seeds its
// model the same; 'per-rank': seeded with its rank, as for data augmentation, and no DDP;
// 'unfrozen': alike, the first layer frozen while the optimizer is created; 'branch': alike, with
// two heads of one shape after the first layer, rank r's batches taking head r only; 'one-rank':
// a head of another shape rank 1 alone uses; 'add-group':
// alike, a param group added after construction; 'layout': alike, loading a plain Adam's state
// saved with another grouping of the same parameters; 'dispose': alike, the optimizer disposed
// after training, `marked` counting the parameters still marked as gradient shards; 'in-ddp': the
// model wrapped in DDP before a stage 2 optimizer is made over it) and
// backwards per step (2: gradient accumulation). Prints the error (name and message) or
// none, whether the parameters are unchanged, and their sum.
import { add, mul, type Tensor, tensor, tidy, sum as total } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { join } from '@ddp/join';
import { Adam, gradientShardGroups, Linear, Module, manualSeed, mse, Sequential, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { ZeroRedundancyOptimizer } from '../index.js';
import { flatParams } from './model.js';

const [stage, init, backwards] = [Number(process.argv[2]) as 1 | 2, process.argv[3], Number(process.argv[4])];
const group = await initProcessGroup({ timeoutMs: 30_000 });
manualSeed(init === 'per-rank' ? 1 + group.rank : 1);
/** A trunk and two heads of one shape; each rank's batches take the head of its rank (a data-dependent branch). */
class TwoHeads extends Module {
  readonly trunk = this.registerModule('trunk', new Sequential(new Linear(4, 6), new Tanh()));
  readonly heads = [this.registerModule('a', new Linear(6, 2)), this.registerModule('b', new Linear(6, 2))];
  forward(x: Tensor): Tensor {
    return this.heads[group.rank % 2].forward(this.trunk.forward(x));
  }
}
/** 'one-rank': a head of another shape only rank 1's batches use, besides the shared one. */
class ExtraOnRankOne extends Module {
  readonly trunk = this.registerModule('trunk', new Sequential(new Linear(4, 6), new Tanh()));
  readonly head = this.registerModule('head', new Linear(6, 2));
  readonly extra = this.registerModule('extra', new Linear(6, 3));
  forward(x: Tensor): Tensor {
    const h = this.trunk.forward(x);
    const y = this.head.forward(h);
    return group.rank === 1 ? add(y, mul(total(this.extra.forward(h)), 0)) : y;
  }
}
const model =
  init === 'branch'
    ? new TwoHeads()
    : init === 'one-rank'
      ? new ExtraOnRankOne()
      : new Sequential(new Linear(4, 6), new Tanh(), new Linear(6, 2));
// 'unfrozen': the first layer frozen while the optimizer is created, trained afterwards
const first = model.parameters().slice(0, 2);
if (init === 'unfrozen') for (const p of first) p.requiresGrad = false;
const [w1, b1, w2, b2] = model.parameters();
const groups = init === 'layout' ? [{ params: [w1, w2] }, { params: [b1, b2] }] : model.parameters();
// 'in-ddp': the model wrapped in DDP first, as for stage 1, then a stage 2 optimizer over it
// 'bad-group': a group whose lr is NaN, its parameters owned by one rank only
if (init === 'in-ddp' || init === 'bad-group') {
  if (init === 'in-ddp') await DistributedDataParallel.create(model);
  const made = init === 'in-ddp' ? groups : [{ params: [w1, b1] }, { params: [w2, b2], lr: Number.NaN }];
  const refused = await Promise.resolve()
    .then(() => new ZeroRedundancyOptimizer(made, Adam, { lr: 0.01 }, { stage }))
    .then(
      () => null,
      (e: Error) => ({ name: e.name, message: e.message }),
    );
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, error: refused, unchanged: true, sum: 0, marked: 0 })}`);
  await destroyProcessGroup();
  process.exit(0);
}
const zero = new ZeroRedundancyOptimizer(groups, Adam, { lr: 0.01 }, { stage });
// 'early-stop': rank r takes 1 + r batches under join with throwOnEarlyTermination; 'join-first':
// rank r takes r batches under join (rank 0 joins before its first step); 'join-divide': 1 + r
// batches under join with divideByInitialWorldSize: false. After the error, is the group still
// usable (an all-reduce's sum) and does the next step train?
if (init === 'early-stop' || init === 'join-first' || init === 'join-divide') {
  const batchStep = async (b: number) => {
    const x = tensor(
      Array.from({ length: 8 }, (_, i) => Math.sin(i + b + group.rank)),
      [2, 4],
    );
    const loss = tidy(() => mse(model.forward(x), tensor([0, 1, 1, 0], [2, 2])));
    await loss.backward();
    loss.dispose();
    x.dispose();
    await zero.step();
    zero.zeroGrad();
  };
  const stopped = await join(
    [zero],
    async () => {
      for (let b = 0; b < group.rank + (init === 'join-first' ? 0 : 1); b++) await batchStep(b);
    },
    { throwOnEarlyTermination: init === 'early-stop', divideByInitialWorldSize: init !== 'join-divide' },
  ).then(
    () => null,
    (e: Error) => ({ name: e.name, message: e.message }),
  );
  const sum = Float32Array.of(group.rank + 1);
  await group.allReduce(sum).wait();
  await batchStep(9); // every rank together again
  const fine = flatParams(model).every(Number.isFinite);
  console.log(
    `RESULT ${JSON.stringify({ rank: group.rank, error: stopped, unchanged: !fine, sum: sum[0], marked: 0 })}`,
  );
  await destroyProcessGroup();
  process.exit(0);
}
for (const p of first) p.requiresGrad = true;
const before = flatParams(model);
let error: { name: string; message: string } | null = null;
try {
  if (init === 'add-group') zero.addParamGroup({ params: [tensor([1, 2], [2], { requiresGrad: true })] });
  if (init === 'layout') {
    // the same shapes as the model's, stepped once by a plain Adam (lr 0.5) grouped [[w1, b1], [w2, b2]]
    const copies = [w1, b1, w2, b2].map((p) => tensor(Array(p.size).fill(0.5), p.shape, { requiresGrad: true }));
    for (const c of copies) c.grad = tf.onesLike(c.data);
    const plain = new Adam([{ params: copies.slice(0, 2) }, { params: copies.slice(2) }], { lr: 0.5 });
    plain.step();
    zero.loadStateDict(plain.stateDict());
  }
  for (let t = 0; t < 2; t++) {
    for (let b = 0; b < backwards; b++) {
      const x = tensor(
        Array.from({ length: 8 }, (_, i) => Math.sin(i + t + b + group.rank)),
        [2, 4],
      );
      const loss = tidy(() => mse(model.forward(x), tensor([0, 1, 1, 0], [2, 2])));
      await loss.backward();
      loss.dispose();
      x.dispose();
    }
    if (stage === 1) {
      // stage 1 expects averaged gradients (DDP's job): average them here
      for (const p of model.parameters()) {
        const g = Float32Array.from(p.grad!.dataSync());
        await group.allReduce(g).wait();
        p.grad = tf.tensor(
          g.map((v) => v / group.size),
          p.shape,
        );
      }
    }
    await zero.step();
    zero.zeroGrad();
  }
} catch (e) {
  error = { name: (e as Error).name, message: (e as Error).message };
}
const after = flatParams(model);
const unchanged = after.every((v, i) => v === before[i]);
const lrs = zero.paramGroups.map((g) => g.lr);
if (init === 'dispose') zero.dispose();
const marked = model.parameters().filter((p) => gradientShardGroups(p).length > 0).length;
const sum = after.reduce((a, b) => a + b, 0);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, unchanged, sum, marked, lrs })}`);
await destroyProcessGroup();
