// DDP where rank 1's batch is padding only (every label ignored), 2 ranks, SGD. Rank 1's loss
// is NaN as torch's mean over no label; its gradient is 0, so DDP averages rank 0's gradient
// with zeros. Prints the loss, the error of the step if any, and the SHA-256 of the parameters
// after it and of a local model stepped by rank 0's gradient halved (what torch's DDP does).
import { createHash } from 'node:crypto';
import { tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { crossEntropy, Generator, Linear, type Module, Sequential, SGD, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const build = () => {
  const gen = new Generator(5);
  return new Sequential(new Linear(3, 4, { generator: gen }), new Tanh(), new Linear(4, 3, { generator: gen }));
};
const x = tensor([1, 2, 3, -1, 0, 2], [2, 3]);
const labels = group.rank === 0 ? [2, 0] : [-100, -100];
const hashOf = (m: Module) => {
  const hash = createHash('sha256');
  for (const p of m.parameters()) hash.update(new Uint8Array((p.data.dataSync() as Float32Array).buffer));
  return hash.digest('hex');
};

const reference = build();
await crossEntropy(reference.forward(x), [2, 0]).backward();
new SGD(reference.parameters(), { lr: 0.25 }).step();

const model = build();
const ddp = await DistributedDataParallel.create(model);
const opt = new SGD(model.parameters(), { lr: 0.5 });
let error: string | null = null;
let loss = 0;
try {
  const l = crossEntropy(ddp.forward(x), labels);
  loss = l.item();
  await l.backward();
  opt.step();
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
const result = { rank: group.rank, loss: String(loss), error, hash: hashOf(model), want: hashOf(reference) };
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();
