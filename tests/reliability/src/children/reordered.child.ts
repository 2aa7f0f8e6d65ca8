// Two layers of one shape, 'a' then 'b' in the forward, registered in that order on rank 0 and
// in the other on rank 1 (a refactor deployed to some hosts only), each initialised from a
// seed of its own name. Prints DDP.create's or the step's error, if any, and the SHA-256 of the
// parameters by name after one SGD step: equal on every rank when DDP paired the same parameters.
import { createHash } from 'node:crypto';
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Generator, Linear, Module, mse, SGD } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });

class Pair extends Module {
  readonly a: Linear;
  readonly b: Linear;
  constructor(swapped: boolean) {
    super();
    const layers = {
      a: new Linear(3, 3, { generator: new Generator(1) }),
      b: new Linear(3, 3, { generator: new Generator(2) }),
    };
    for (const name of swapped ? (['b', 'a'] as const) : (['a', 'b'] as const)) this.registerModule(name, layers[name]);
    this.a = layers.a;
    this.b = layers.b;
  }
  forward(x: Tensor): Tensor {
    return this.b.forward(this.a.forward(x).tanh());
  }
}

const model = new Pair(group.rank === 1);
const error = await errorOf(async () => {
  const ddp = await DistributedDataParallel.create(model);
  const opt = new SGD(model.parameters(), { lr: 0.5 });
  const x = rankBatch(group.rank);
  const loss = tidy(() => mse(ddp.forward(x), tensor([1, 0, 0, 1, 0, 1], [2, 3])));
  await loss.backward();
  opt.step();
});
const hash = createHash('sha256');
for (const [, p] of model.namedParameters().sort(([x], [y]) => x.localeCompare(y)))
  hash.update(new Uint8Array((p.data.dataSync() as Float32Array).buffer));
console.log(`RESULT ${JSON.stringify({ error, hash: hash.digest('hex') })}`);
await destroyProcessGroup();
