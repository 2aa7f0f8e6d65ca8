// A layer frozen when fullyShard runs and unfrozen afterwards (fine-tuning's second phase), 2
// ranks with different data, Adam over the root's parameters (the shards). Prints the step's
// error, if any, and whether the unfrozen layer's weight moved.
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard } from '@ddp/fsdp';
import { Adam, Generator, Linear, mse, Sequential, Tanh } from '@ddp/nn';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const gen = new Generator(3);
const first = new Linear(3, 4, { generator: gen });
const model = new Sequential(first, new Tanh(), new Linear(4, 2, { generator: gen }));
for (const p of first.parameters()) p.requiresGrad = false;
const root = fullyShard(model);
for (const p of first.parameters()) p.requiresGrad = true;
const before = Array.from(first.weight.data.dataSync());
const opt = new Adam(root.parameters(), { lr: 0.1 });
const error = await errorOf(async () => {
  const x = rankBatch(group.rank);
  const out: Tensor = await root.forward(x);
  const loss = tidy(() => mse(out, tensor([1, 0, 0, 1], [2, 2])));
  await loss.backward();
  opt.step();
});
const moved = Array.from(first.weight.data.dataSync()).some((v, i) => v !== before[i]);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, moved })}`);
await destroyProcessGroup();
