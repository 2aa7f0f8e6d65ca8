// One rank of the SyncBatchNorm golden test: argv = fixture name, batch rows per rank ("1,0,3").
import { destroyProcessGroup, initProcessGroup, ReduceOp } from '@ddp/comm';
import { tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { SyncBatchNorm } from '../index.js';
import { batchRows, loadGolden } from './golden.js';

const [name, splitArg] = process.argv.slice(2) as [string, string];
const group = await initProcessGroup({ timeoutMs: 30_000 });
const g = loadGolden(name);
const split = splitArg.split(',').map(Number);
const count = split[group.rank]!;
const start = split.slice(0, group.rank).reduce((a, b) => a + b, 0);
const shape = [count, ...g.inputs.x.shape.slice(1)];
const channels = g.inputs.x.shape[1]!;

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
const x = tensor(batchRows(g.inputs.x, start, count), shape, { requiresGrad: true });
const dy = tf.tensor(batchRows(g.inputs.dy, start, count), shape);

async function step() {
  const y = await bn.forwardAsync(x);
  const yValues = Array.from(y.dataSync());
  await y.backward(dy);
  y.dispose();
  const dw = Float32Array.from(bn.weight!.grad!.dataSync());
  const db = Float32Array.from(bn.bias!.grad!.dataSync());
  // DDP's averaging of the parameter gradients.
  await group.allReduce(dw, { op: ReduceOp.AVG }).wait();
  await group.allReduce(db, { op: ReduceOp.AVG }).wait();
  const out = {
    y: yValues,
    dx: Array.from(x.grad!.dataSync()),
    dweight: Array.from(dw),
    dbias: Array.from(db),
    runningMean: Array.from(bn.runningMean.dataSync()),
    runningVar: Array.from(bn.runningVar.dataSync()),
  };
  x.grad = null;
  bn.zeroGrad();
  return out;
}

const first = await step();
const before = tf.memory().numTensors;
await step();
const leaked = tf.memory().numTensors - before;
bn.eval();
const evalY = bn.forward(x); // running stats, no communication
const evalOut = Array.from(evalY.dataSync());
evalY.dispose();
console.log(`RESULT ${JSON.stringify({ ...first, leaked, evalY: evalOut, evalRunningMean: Array.from(bn.runningMean.dataSync()), evalRunningVar: Array.from(bn.runningVar.dataSync()) })}`);
await destroyProcessGroup();
