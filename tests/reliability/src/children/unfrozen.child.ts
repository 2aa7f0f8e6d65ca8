// A layer frozen when DDP is created and unfrozen afterwards (fine-tuning's usual second phase),
// 2 ranks with different data, SGD. Prints the error of the step, if any, and the SHA-256 of
// the parameters after it: equal on every rank unless a gradient went unaveraged.
import { createHash } from 'node:crypto';
import { tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Generator, Linear, mse, Sequential, SGD, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const gen = new Generator(3);
const model = new Sequential(new Linear(3, 4, { generator: gen }), new Tanh(), new Linear(4, 2, { generator: gen }));
const first = model.parameters().slice(0, 2);
for (const p of first) p.requiresGrad = false;
const ddp = await DistributedDataParallel.create(model);
for (const p of first) p.requiresGrad = true;
const opt = new SGD(model.parameters(), { lr: 0.5 });
const error = await errorOf(async () => {
  const x = rankBatch(group.rank);
  const loss = tidy(() => mse(ddp.forward(x), tensor([1, 0, 0, 1], [2, 2])));
  await loss.backward();
  opt.step();
});
const hash = createHash('sha256');
for (const p of model.parameters()) hash.update(new Uint8Array((p.data.dataSync() as Float32Array).buffer));
console.log(`RESULT ${JSON.stringify({ error, hash: hash.digest('hex') })}`);
await destroyProcessGroup();
