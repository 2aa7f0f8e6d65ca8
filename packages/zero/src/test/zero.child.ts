// One rank of zero.multiprocess.test.ts: trains the test model with ZeroRedundancyOptimizer and
// compares with a single-process run of the same global batches and the full optimizer.
import { createHash } from 'node:crypto';
import { join as joinPath } from 'node:path';
import { parseArgs } from 'node:util';
import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { join } from '@ddp/join';
import { DistributedDataParallel } from '@ddp/reducer';
import { loadCheckpoint, saveCheckpoint, type Optimizer } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { optimizerStateBytes, ZeroRedundancyOptimizer } from '../index.js';
import { GradAverager } from './grad-averager.js';
import { flatParams, lossOf, makeModel, OPTIMIZERS, OPTIONS, type OptimizerName } from './model.js';

const { values } = parseArgs({
  options: {
    stage: { type: 'string', default: '1' },
    opt: { type: 'string', default: 'adam' },
    steps: { type: 'string', default: '20' },
    mode: { type: 'string', default: 'even' },
    bucket: { type: 'boolean', default: false },
    dir: { type: 'string', default: '' },
    ddp: { type: 'boolean', default: false },
  },
});
const stage = Number(values.stage) as 1 | 2;
const opt = values.opt as OptimizerName;
const mode = values.mode as 'even' | 'uneven' | 'checkpoint';
const group = await initProcessGroup({ timeoutMs: 30_000 });
const { rank, size } = group;
const stepsOf = (r: number) => (mode === 'uneven' ? 5 + r : Number(values.steps));

// biome-ignore lint/suspicious/noExplicitAny: any optimizer's options
const OptimizerClass = OPTIMIZERS[opt] as any;
function makeZero(model: ReturnType<typeof makeModel>) {
  return new ZeroRedundancyOptimizer(model.parameters(), OptimizerClass, OPTIONS[opt], { stage, parametersAsBucketView: values.bucket });
}

let model = makeModel();
let zero = makeZero(model);
// stage 1 needs averaged gradients: DDP (@ddp/reducer) or the test's GradAverager
const ddp = values.ddp ? await DistributedDataParallel.create(model) : null;
let averager = stage === 1 && !ddp ? new GradAverager(model.parameters(), group) : null;

async function trainStep(t: number): Promise<void> {
  const notified = averager?.startIteration();
  const loss = tidy(() => lossOf(ddp ?? model, t, rank));
  await loss.backward();
  loss.dispose();
  await notified;
  await averager?.average();
  await zero.step();
  zero.zeroGrad();
}

// the reference: one process, every rank's batch of each step, the full optimizer
const ref = makeModel();
const refOpt: Optimizer<{ lr: number }> = new OptimizerClass(ref.parameters(), OPTIONS[opt]);
const maxSteps = Math.max(...Array.from({ length: size }, (_, r) => stepsOf(r)));
async function refStep(t: number): Promise<void> {
  const loss = tidy(() => {
    const active = Array.from({ length: size }, (_, r) => r).filter((r) => stepsOf(r) > t);
    return active.map((r) => lossOf(ref, t, r)).reduce((a, b) => a.add(b)).div(size);
  });
  await loss.backward();
  loss.dispose();
  refOpt.step();
  refOpt.zeroGrad();
}

const maxDiff = (a: number[], b: number[]) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
const result: Record<string, unknown> = { rank };
let tensorsAfter5 = 0;
if (mode === 'uneven') {
  await join(ddp ? [ddp, zero] : averager ? [averager, zero] : [zero], async () => {
    for (let t = 0; t < stepsOf(rank); t++) await trainStep(t);
  });
  for (let t = 0; t < maxSteps; t++) await refStep(t);
} else if (mode === 'even') {
  for (let t = 0; t < maxSteps; t++) {
    await trainStep(t);
    await refStep(t);
    if (t === 4) tensorsAfter5 = tf.memory().numTensors;
  }
  result.tensorGrowth = tf.memory().numTensors - tensorsAfter5;
  result.stateBytes = optimizerStateBytes(zero.optim);
  result.fullStateBytes = optimizerStateBytes(refOpt);
} else {
  const half = maxSteps / 2;
  for (let t = 0; t < half; t++) {
    await trainStep(t);
    await refStep(t);
  }
  await zero.consolidateStateDict(0);
  const dir = joinPath(values.dir, 'ckpt');
  if (rank === 0) {
    const full = zero.stateDict();
    const want = refOpt.stateDict();
    let diff = 0;
    for (const [i, s] of want.state) {
      for (const [k, v] of Object.entries(s)) {
        const got = full.state.get(i)?.[k];
        diff = Math.max(diff, typeof v === 'number' ? Math.abs(v - (got as number)) : maxDiff([...(got as tf.Tensor).dataSync()], [...v.dataSync()]));
      }
    }
    result.consolidatedDiff = diff;
    result.consolidatedEntries = full.state.size;
    await saveCheckpoint(dir, { model, optimizer: zero, step: half });
  } else {
    let threw = '';
    try {
      zero.stateDict();
    } catch (e) {
      threw = (e as Error).name;
    }
    result.stateDictOffTarget = threw;
  }
  await group.barrier().wait();
  // a fresh world state restored from the checkpoint, as after a restart
  zero.dispose();
  model.dispose();
  model = makeModel();
  zero = makeZero(model);
  averager = stage === 1 ? new GradAverager(model.parameters(), group) : null; // checkpoint mode runs without DDP
  result.resumedAt = (await loadCheckpoint(dir, { model, optimizer: zero })).step;
  for (let t = half; t < maxSteps; t++) {
    await trainStep(t);
    await refStep(t);
  }
}
const params = flatParams(model);
result.maxDiff = maxDiff(params, flatParams(ref));
result.hash = createHash('sha256').update(Float32Array.from(params)).digest('hex').slice(0, 16);
console.log(`RESULT ${JSON.stringify(result)}`);
await destroyProcessGroup();
