// A rank of sharded-checkpoint.multiprocess.test.ts: trains a small model with ZeRO stage 1 Adam
// on a fixed global batch (12 rows per step, rank r takes its contiguous 12/N rows, gradients
// averaged by all-reduce), so the result does not depend on the world size.
//   --from a --to b: train steps a..b-1;  --load dir: resume from a sharded checkpoint first;
//   --save dir: save one after (and train on and change the state while it writes);
//   --broken dir (repeated): first try loading these and report the errors;
//   --load-by-rank dir (repeated): rank r loads the r-th, then reports the first step's error.
// With --load it also trains the uninterrupted reference (one process, full batch, plain Adam,
// steps 0..b-1) and reports the largest difference. Prints one RESULT line.
import { parseArgs } from 'node:util';
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup, ReduceOp } from '@ddp/comm';
import { Adam, Generator, Linear, type Module, mse, Sequential, Tanh } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { loadShardedCheckpoint, saveShardedCheckpoint, ZeroRedundancyOptimizer } from '../index.js';

const ROWS = 12;
const IN = 6;
const OUT = 3;
const OPTIONS = { lr: 0.02 };

function makeModel(): Sequential {
  const gen = new Generator(11);
  return new Sequential(
    new Linear(IN, 8, { generator: gen }),
    new Tanh(),
    new Linear(8, 8, { generator: gen }),
    new Tanh(),
    new Linear(8, OUT, { generator: gen }),
  );
}

/** Rows [lo, hi) of step t's global batch. */
function lossOn(model: Module & { forward(x: Tensor): Tensor }, t: number, lo: number, hi: number): Tensor {
  const gen = new Generator(500 + t);
  const xs = gen.normal(ROWS * IN);
  const ys = gen.normal(ROWS * OUT);
  const x = tensor(xs.slice(lo * IN, hi * IN), [hi - lo, IN]);
  const y = tensor(ys.slice(lo * OUT, hi * OUT), [hi - lo, OUT]);
  const loss = mse(model.forward(x), y);
  x.dispose();
  y.dispose();
  return loss;
}

const flat = (m: Module) => m.parameters().flatMap((p) => [...(p.data.dataSync() as Float32Array)]);

async function averageGradients(params: Tensor[], group: ProcessGroup): Promise<void> {
  for (const p of params) {
    const buf = new Float32Array(p.grad!.dataSync() as Float32Array);
    await group.allReduce(buf, { op: ReduceOp.SUM }).wait();
    p.grad = tf.tensor(
      buf.map((v) => v / group.size),
      p.shape,
      'float32',
    );
  }
}

const { values } = parseArgs({
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    load: { type: 'string' },
    save: { type: 'string' },
    broken: { type: 'string', multiple: true },
    'load-by-rank': { type: 'string', multiple: true },
  },
});
const group = await initProcessGroup({ timeoutMs: 30_000 });
const { rank, size } = group;
const result: Record<string, unknown> = { rank };

const model = makeModel();
const zero = new ZeroRedundancyOptimizer(model.parameters(), Adam, OPTIONS, { stage: 1 });
const broken: unknown[] = [];
for (const dir of values.broken ?? []) {
  try {
    await loadShardedCheckpoint(dir, { model, optimizer: zero });
    broken.push(null);
  } catch (e) {
    broken.push({ name: (e as Error).name, message: (e as Error).message, file: (e as { file?: string }).file });
  }
}
if (values.broken) result.broken = broken;
const byRank = values['load-by-rank'];
if (byRank) {
  await loadShardedCheckpoint(byRank[rank], { model, optimizer: zero });
  try {
    await zero.step();
  } catch (e) {
    result.stepError = { name: (e as Error).name, message: (e as Error).message };
  }
}
let from = Number(values.from ?? 0);
if (values.load) from = (await loadShardedCheckpoint(values.load, { model, optimizer: zero })).step;
const to = Number(values.to);
const per = ROWS / size;
async function trainStep(t: number): Promise<void> {
  const loss = tidy(() => lossOn(model, t, rank * per, (rank + 1) * per));
  await loss.backward();
  loss.dispose();
  await averageGradients(model.parameters(), group);
  await zero.step();
  zero.zeroGrad();
}
for (let t = from; t < to; t++) await trainStep(t);
result.params = flat(model);
if (values.save) {
  const extra = { note: 'test' };
  const saving = saveShardedCheckpoint(values.save, { model, optimizer: zero, step: to, extra });
  // training goes on while the save writes, collectives included (they interleaved with the save's
  // on the optimizer's group: CollectiveMismatchError): what it saves must be the state at the call
  for (let t = to; t < to + 2; t++) await trainStep(t);
  for (const p of model.parameters()) p.data = tf.mul(p.data, 2);
  for (const state of zero.optim?.state.values() ?? []) state.step = Number(state.step) + 7;
  extra.note = 'changed';
  await saving;
}

if (values.load) {
  const ref = makeModel();
  const adam = new Adam(ref.parameters(), OPTIONS);
  for (let t = 0; t < to; t++) {
    const loss = tidy(() => lossOn(ref, t, 0, ROWS));
    await loss.backward();
    loss.dispose();
    adam.step();
    adam.zeroGrad();
  }
  const r = flat(ref);
  result.maxDiff = (result.params as number[]).reduce((m, v, i) => Math.max(m, Math.abs(v - r[i])), 0);
  result.resumedAt = from;
}
zero.dispose();
await destroyProcessGroup();
console.log(`RESULT ${JSON.stringify(result)}`);
