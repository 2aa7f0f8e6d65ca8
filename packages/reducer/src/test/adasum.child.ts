// One rank of the Adasum test: prints its local vectors / gradients and what Adasum made of them.

import { markParameterShard, mse, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, sharedArray } from '@ddp/comm';
import { Adam, Generator, Linear, Sequential } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { AdasumOptimizer, AdasumState, adasumAllReduce, adasumHook, DistributedDataParallel } from '../index.js';

const group = await initProcessGroup({ timeoutMs: 30_000 });
const gen = new Generator(40 + group.rank);
// 'spanning': parameter 0 is a tensor-parallel shard whose two parts are ranks 0 and 1, and the
// optimizer is given the world instead of a data-parallel group
if (process.argv[2] === 'spanning') {
  const model = new Linear(2, 1);
  markParameterShard(model.parameters()[0], { ranks: [0, 1], rank: group.rank });
  const opt = new AdasumOptimizer(new Adam(model.parameters()), group);
  const loss = mse(model.forward(tensor([1, 2], [1, 2])), tensor([0], [1, 1]));
  await loss.backward();
  const before = Array.from(model.parameters()[0].data.dataSync());
  const error = await opt.step().then(
    () => '',
    (e: Error) => `${e.name}: ${e.message}`,
  );
  const unchanged = Array.from(model.parameters()[0].data.dataSync()).every((v, i) => v === before[i]);
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, optimizerError: '', unchanged })}`);
  await destroyProcessGroup();
  process.exit(0);
}
// 'big': two Linear(256, 256) under DDP's adasumHook: the bucket packs both biases before the 65 536-weight
// matrices, out of member order (the segment check refused it on every backward); against adasumAllReduce
if (process.argv[2] === 'big') {
  const build = () => {
    const gen = new Generator(5);
    return new Sequential(new Linear(256, 256, { generator: gen }), new Linear(256, 256, { generator: gen }));
  };
  const xs = tensor(new Generator(60 + group.rank).normal(3 * 256), [3, 256]);
  const ys = tensor(new Generator(70 + group.rank).normal(3 * 256), [3, 256]);
  const [plain, wrapped] = [build(), build()];
  const ddpBig = await DistributedDataParallel.create(wrapped, { processGroup: group });
  ddpBig.registerCommHook(new AdasumState(), adasumHook);
  let error = '';
  let maxDiff = Number.NaN;
  try {
    for (const f of [(t: typeof xs) => plain.forward(t), (t: typeof xs) => ddpBig.forward(t)])
      await mse(f(xs), ys).backward();
    const locals = plain.parameters().map((p) => p.grad!.dataSync());
    const flat = sharedArray(
      Float32Array,
      locals.reduce((n, g) => n + g.length, 0),
    );
    let offset = 0;
    const segments = locals.map((g) => {
      flat.set(g, offset);
      offset += g.length;
      return { offset: offset - g.length, size: g.length };
    });
    await adasumAllReduce(flat, group, segments);
    const got = wrapped.parameters().flatMap((p) => Array.from(p.grad!.dataSync()));
    maxDiff = got.reduce((m, v, i) => Math.max(m, Math.abs(v - flat[i])), 0);
  } catch (e) {
    error = `${(e as Error).name}: ${(e as Error).message}`;
  }
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, maxDiff })}`);
  await destroyProcessGroup();
  process.exit(0);
}
if (process.argv[2] === 'odd') {
  const error = await adasumAllReduce(sharedArray(Float32Array, 4), group).then(
    () => '',
    (e: Error) => `${e.name}: ${e.message}`,
  );
  let optimizerError = '';
  try {
    new AdasumOptimizer(new Adam(new Linear(2, 1).parameters()), group);
  } catch (e) {
    optimizerError = `${(e as Error).name}: ${(e as Error).message}`;
  }
  console.log(`RESULT ${JSON.stringify({ rank: group.rank, error, optimizerError })}`);
  await destroyProcessGroup();
  process.exit(0);
}

// 1. adasumAllReduce on a flat buffer of two segments
const local = gen.normal(10);
const buf = sharedArray(Float32Array, 10);
buf.set(local);
await adasumAllReduce(buf, group, [
  { offset: 0, size: 6 },
  { offset: 6, size: 4 },
]);

// 2. as DDP's comm hook: this rank's own gradient (a copy without DDP), then DDP's
const x = tensor(gen.normal(12), [3, 4]);
const y = tensor(gen.normal(6), [3, 2]);
const gradsOf = async (model: Linear, forward: (t: typeof x) => typeof x) => {
  const loss = mse(forward(x), y);
  await loss.backward();
  loss.dispose();
  return model.parameters().map((p) => Array.from(p.grad!.dataSync()));
};
const plain = new Linear(4, 2, { generator: new Generator(3) });
const localGrads = await gradsOf(plain, (t) => plain.forward(t));
const model = new Linear(4, 2, { generator: new Generator(3) });
const ddp = await DistributedDataParallel.create(model, { processGroup: group });
ddp.registerCommHook(new AdasumState(), adasumHook);
const ddpGrads = await gradsOf(model, (t) => ddp.forward(t));

// 3. AdasumOptimizer over Adam: this rank's own Adam step (a copy alone), then the combined one, 3 steps
const valuesOf = (m: Linear) => m.parameters().map((p) => Array.from(p.data.dataSync()));
const solo = new Linear(4, 2, { generator: new Generator(3) });
const start = valuesOf(solo);
await gradsOf(solo, (t) => solo.forward(t));
new Adam(solo.parameters(), { lr: 0.01 }).step();
const localDeltas = valuesOf(solo).map((v, p) => v.map((x, i) => x - start[p][i]));
const shared = new Linear(4, 2, { generator: new Generator(3) });
const opt = new AdasumOptimizer(new Adam(shared.parameters(), { lr: 0.01 }), group);
const stepped: number[][][] = [];
const numTensors: number[] = [];
for (let s = 0; s < 3; s++) {
  await gradsOf(shared, (t) => shared.forward(t));
  await opt.step();
  opt.zeroGrad();
  stepped.push(valuesOf(shared));
  numTensors.push(tf.memory().numTensors);
}
const adasumOptimizer = { start, localDeltas, stepped, numTensors };
console.log(
  `RESULT ${JSON.stringify({
    rank: group.rank,
    local: Array.from(local),
    adasum: Array.from(buf),
    localGrads,
    ddpGrads,
    adasumOptimizer,
  })}`,
);
await destroyProcessGroup();
