// Layers frozen on some ranks only (a rank-dependent config), 2 ranks, DDP then SGD: argv 'one' freezes
// layer 2 on rank 1; 'swap' freezes layer 2 on rank 0 and the same-shaped layer 4 on rank 1. Prints the
// error of create or the step, if any, and the start of the SHA-256 of the parameters after it.
import { createHash } from 'node:crypto';
import { tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Generator, Linear, mse, Sequential, SGD, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 10_000 });
const gen = new Generator(3);
const model = new Sequential(
  new Linear(3, 4, { generator: gen }),
  new Tanh(),
  new Linear(4, 4, { generator: gen }),
  new Tanh(),
  new Linear(4, 4, { generator: gen }),
);
const frozen = process.argv[2] === 'swap' ? [group.rank === 0 ? 2 : 4] : group.rank === 1 ? [2] : [];
for (const i of frozen) for (const p of (model.at(i) as Linear).parameters()) p.requiresGrad = false;
const error = await errorOf(async () => {
  const ddp = await DistributedDataParallel.create(model);
  const opt = new SGD(model.parameters(), { lr: 0.5 });
  const x = rankBatch(group.rank);
  const loss = tidy(() => mse(ddp.forward(x), tensor([1, 0, 0, 1, 1, 0, 0, 1], [2, 4])));
  await loss.backward();
  opt.step();
});
const hash = createHash('sha256');
for (const p of model.parameters()) hash.update(new Uint8Array((p.data.dataSync() as Float32Array).buffer));
const result = { rank: group.rank, error: error?.slice(0, 300) ?? null, hash: hash.digest('hex').slice(0, 8) };
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();
