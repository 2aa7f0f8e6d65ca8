// A model seeded with the rank (as for data augmentation), wrapped by fullyShard without any
// broadcast, 2 ranks, one Adam step. Prints the step's error, if any, and the full parameters
// after it (summonFullParams): each rank kept its slice of its own model, so the whole is
// neither rank's model.
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { fullyShard } from '@ddp/fsdp';
import { Adam, Generator, Linear, mse, Sequential, Tanh } from '@ddp/nn';
import { errorOf } from './step.js';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const gen = new Generator(1 + group.rank);
const model = new Sequential(new Linear(3, 4, { generator: gen }), new Tanh(), new Linear(4, 2, { generator: gen }));
const root = fullyShard(model);
const opt = new Adam(root.parameters(), { lr: 0.1 });
const error = await errorOf(async () => {
  const x = tensor([1, 2, 3, -1, 0, 2], [2, 3]);
  const out: Tensor = await root.forward(x);
  const loss = tidy(() => mse(out, tensor([1, 0, 0, 1], [2, 2])));
  await loss.backward();
  opt.step();
});
console.log(`RESULT ${JSON.stringify({ rank: group.rank, error })}`);
await destroyProcessGroup();
