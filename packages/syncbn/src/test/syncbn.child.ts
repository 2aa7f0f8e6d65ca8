// One rank of the SyncBatchNorm golden test: argv = fixture name, batch rows per rank ("1,0,3").

import { type Tensor, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { BatchNorm1d, BatchNorm2d, Module } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { SyncBatchNorm, SyncBatchNormError } from '../index.js';
import { batchRows, loadGolden } from './golden.js';

const [name, splitArg] = process.argv.slice(2) as [string, string];
const group = await initProcessGroup({ timeoutMs: 30_000 });
const g = loadGolden(name);
const split = splitArg.split(',').map(Number);
const count = split[group.rank];
const start = split.slice(0, group.rank).reduce((a, b) => a + b, 0);
const shape = [count, ...g.inputs.x.shape.slice(1)];
const channels = g.inputs.x.shape[1];

const bn = new SyncBatchNorm(channels);
bn.loadStateDict(
  new Map([
    ['weight', tf.tensor(g.inputs.weight.data)],
    ['bias', tf.tensor(g.inputs.bias.data)],
    ['running_mean', tf.tensor(g.inputs.running_mean.data)],
    ['running_var', tf.tensor(g.inputs.running_var.data)],
    ['num_batches_tracked', tf.scalar(0, 'int32')],
  ]),
);
/** The layer as a model whose forward is async, so that DDP can wrap it. */
class Net extends Module {
  constructor(readonly bn: SyncBatchNorm) {
    super();
    this.registerModule('bn', bn);
  }
  forward(input: Tensor): Promise<Tensor> {
    return this.bn.forwardAsync(input);
  }
}
const ddp = await DistributedDataParallel.create(new Net(bn));
const x = tensor(batchRows(g.inputs.x, start, count), shape, { requiresGrad: true });
const dy = tf.tensor(batchRows(g.inputs.dy, start, count), shape);

async function step() {
  const y = await ddp.forward(x);
  const yValues = Array.from(y.dataSync());
  await y.backward(dy); // resolves once DDP has averaged the gradients over the ranks
  y.dispose();
  const dw = Array.from(bn.weight!.grad!.dataSync());
  const db = Array.from(bn.bias!.grad!.dataSync());
  const out = {
    y: yValues,
    dx: Array.from(x.grad!.dataSync()),
    dweight: dw,
    dbias: db,
    runningMean: Array.from(bn.runningMean.dataSync()),
    runningVar: Array.from(bn.runningVar.dataSync()),
  };
  x.grad = null;
  bn.zeroGrad();
  return out;
}

// The synchronous forward refuses to train over several ranks (it would need a collective).
let syncForwardError = '';
try {
  bn.forward(x);
} catch (e) {
  syncForwardError = e instanceof SyncBatchNormError ? e.name : String(e);
}

let evalRefused = 'no error';
/**
 * 1d ([N, C]) against nn.BatchNorm1d on the whole batch in this process: largest differences. eps 0 with
 * channel 0 constant: was NaN (rsqrt(0)), torch's invstd is 0 there.
 */
async function oneD(eps = 1e-5): Promise<Record<string, number>> {
  const total = split.reduce((a, b) => a + b, 0);
  const values = (seed: number) =>
    Array.from({ length: total * 3 }, (_, i) =>
      eps === 0 && i % 3 === 0 ? 2 : Math.sin(i * 1.7 + seed) * (1 + (i % 5)),
    );
  const [xs, dys] = [values(1), values(2)];
  const ref = new BatchNorm1d(3, { momentum: 0.2, eps });
  const xFull = tensor(xs, [total, 3], { requiresGrad: true });
  const yFull = ref.forward(xFull);
  await yFull.backward(tf.tensor(dys, [total, 3]));
  const sync = new SyncBatchNorm(3, { momentum: 0.2, eps });
  const xl = tensor(xs.slice(start * 3, (start + count) * 3), [count, 3], { requiresGrad: true });
  const pending = sync.forwardAsync(xl);
  // eval() before the forward is awaited (was: its running stats left untouched)
  try {
    sync.eval();
  } catch (e) {
    evalRefused = (e as Error).name;
  }
  const y = await pending;
  await y.backward(tf.tensor(dys.slice(start * 3, (start + count) * 3), [count, 3]));
  const dw = Float32Array.from(sync.weight!.grad!.dataSync());
  await group.allReduce(dw).wait();
  const diff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
    Math.max(0, ...Array.from(a, (v, i) => Math.abs(v - b[i])));
  const rows = (t: { dataSync(): ArrayLike<number> }) => Array.from(t.dataSync()).slice(start * 3, (start + count) * 3);
  return {
    y: diff(y.dataSync(), rows(yFull)),
    dx: diff(xl.grad!.dataSync(), rows(xFull.grad!)),
    runningVar: diff(sync.runningVar.dataSync(), ref.runningVar.dataSync()),
    dweight: diff(dw, ref.weight!.grad!.dataSync()),
    ...(eps === 0 ? {} : { tinyRunningVar: await tinyVarianceError(xs.map((v) => 1e-6 * v)) }),
  };
}

/**
 * Relative error of running_var (momentum 1: the batch's unbiased variance) for a batch whose variance
 * is far below eps, against BatchNorm1d on the whole batch (probe CD: gathered as invstd, 1/invstd² − eps
 * kept 2–190 % of it, some channels negative).
 */
async function tinyVarianceError(xs: number[]): Promise<number> {
  const total = xs.length / 3;
  const ref = new BatchNorm1d(3, { momentum: 1 });
  const [whole, mine] = [tensor(xs, [total, 3]), tensor(xs.slice(start * 3, (start + count) * 3), [count, 3])];
  ref.forward(whole).dispose();
  const sync = new SyncBatchNorm(3, { momentum: 1 });
  (await sync.forwardAsync(mine)).dispose();
  whole.dispose();
  mine.dispose();
  const want = ref.runningVar.dataSync();
  return Math.max(...Array.from(sync.runningVar.dataSync(), (v, i) => Math.abs(v - want[i]) / want[i]));
}

const first = await step();
const before = tf.memory().numTensors;
await step();
const leaked = tf.memory().numTensors - before;
bn.eval();
const evalY = bn.forward(x); // running stats, no communication
const evalOut = Array.from(evalY.dataSync());
evalY.dispose();
// forwardAsync in eval, as training code calls it: nothing left behind (was 13 tensors a call; probe BA)
(await bn.forwardAsync(x)).dispose();
const beforeEval = tf.memory().numTensors;
for (let i = 0; i < 3; i++) (await bn.forwardAsync(x)).dispose();
const evalLeaked = tf.memory().numTensors - beforeEval;
const oneDDiffs = await oneD();
for (const [what, d] of Object.entries(await oneD(0))) oneDDiffs[`eps 0 ${what}`] = d;
// one value per channel over the whole group (rank 0 one row, the others none): an error on every rank
let oneValue = 'no error';
try {
  const lone = new SyncBatchNorm(3);
  const rows = group.rank === 0 ? 1 : 0;
  await lone.forwardAsync(tensor([1, 2, 3].slice(0, rows * 3), [rows, 3]));
} catch (e) {
  oneValue = e instanceof SyncBatchNormError ? e.message : String(e);
}
// eval without running statistics: each rank normalises by its own batch and nothing is exchanged,
// as torch's (need_sync = bn_training and self.training); forward and forwardAsync alike
async function untrackedEval(): Promise<number | string> {
  const untracked = new SyncBatchNorm(channels, { trackRunningStats: false });
  const local = new BatchNorm2d(channels, { trackRunningStats: false });
  untracked.eval();
  local.eval();
  try {
    const [a, b, want] = [untracked.forward(x), await untracked.forwardAsync(x), local.forward(x)];
    const diff = Math.max(...[a, b].map((t) => tf.tidy(() => tf.max(tf.abs(tf.sub(t.data, want.data))).dataSync()[0])));
    tf.dispose([a.data, b.data, want.data]);
    return count === 0 ? 0 : diff;
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}
const untracked = await untrackedEval();
// a rank outside the layer's group (null, what newGroup gives it): its own batch, no communication, as
// torch's (was: taken for the world, whose all-gather the group's members never joined)
function outsideGroup(): number | string {
  const own = tensor(
    Array.from({ length: 4 * channels }, (_, i) => Math.sin(i + group.rank)),
    [4, channels],
  );
  const [outside, local] = [new SyncBatchNorm(channels, { processGroup: null }), new BatchNorm1d(channels)];
  try {
    const [a, want] = [outside.forward(own), local.forward(own)];
    const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(a.data, want.data))).dataSync()[0]);
    tf.dispose([a.data, want.data, own.data]);
    return diff;
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}
const evalStats = {
  evalRunningMean: Array.from(bn.runningMean.dataSync()),
  evalRunningVar: Array.from(bn.runningVar.dataSync()),
};
const result = {
  ...first,
  leaked,
  evalLeaked,
  syncForwardError,
  oneValue,
  oneD: oneDDiffs,
  evalRefused,
  evalY: evalOut,
  ...evalStats,
  untracked,
  outsideGroup: outsideGroup(),
};
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();
