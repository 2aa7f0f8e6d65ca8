// An optimizer built over the model's parameters before fullyShard (as one may with DDP), 2 ranks,
// one Adam step. Prints the step's error, if any, and whether any weight moved (summonFullParams);
// then the errors of a clip over the model's parameters (freed while resharded), as torch's
// clip_grad_norm_(model.parameters()) is written (probe AJ: it returned 0 and clipped nothing).
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard } from '@ddp/fsdp';
import { Adam, clipGradNorm, clipGradNormDistributed, Generator, Linear, mse, Sequential, Tanh } from '@ddp/nn';
import { errorOf, rankBatch } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const gen = new Generator(3);
const model = new Sequential(new Linear(3, 4, { generator: gen }), new Tanh(), new Linear(4, 2, { generator: gen }));
const opt = new Adam(model.parameters(), { lr: 0.1 });
const root = fullyShard(model);
const full = async () => root.summonFullParams(() => model.parameters().flatMap((p) => [...p.data.dataSync()]));
const before = await full();
const error = await errorOf(async () => {
  const x = rankBatch(group.rank);
  const out: Tensor = await root.forward(x);
  const loss = tidy(() => mse(out, tensor([1, 0, 0, 1], [2, 2])));
  await loss.backward();
  opt.step();
});
const clip = await errorOf(async () => {
  clipGradNorm(model.parameters(), 0.5);
});
const clipDistributed = await errorOf(async () => {
  await clipGradNormDistributed(model.parameters(), 0.5, { groups: [group] });
});
const after = await full();
const moved = after.some((v, i) => v !== before[i]);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, moved, clip, clipDistributed })}`);
await destroyProcessGroup();
