// One world of zero.multiprocess.test.ts: runs each case of --cases (JSON) in turn, training the
// test model with ZeroRedundancyOptimizer and comparing with a single-process run of the same
// global batches and the full optimizer. Prints one RESULT line: an array, one entry per case.
import { createHash } from 'node:crypto';
import { join as joinPath } from 'node:path';
import { tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, type ProcessGroup } from '@ddp/comm';
import { join } from '@ddp/join';
import { loadCheckpoint, type Optimizer, saveCheckpoint } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { optimizerStateBytes, ZeroRedundancyOptimizer } from '../index.js';
import { GradAverager } from './grad-averager.js';
import { flatParams, lossOf, makeModel, OPTIMIZERS, OPTIONS, type OptimizerName } from './model.js';

export interface Case {
  stage: 1 | 2;
  opt: OptimizerName;
  mode: 'even' | 'uneven' | 'checkpoint';
  /** parametersAsBucketView */
  bucket?: boolean;
  /** stage 1's gradients from @ddp/reducer's DDP instead of the test's GradAverager */
  ddp?: boolean;
  /** checkpoint directory (mode 'checkpoint') */
  dir?: string;
  /** no zeroGrad between steps on either side: gradients accumulate across steps, as in torch */
  keepGrads?: boolean;
}

const STEPS = 20;
const maxDiff = (a: number[], b: number[]) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

async function runCase(c: Case, group: ProcessGroup): Promise<Record<string, unknown>> {
  const { rank, size } = group;
  const stepsOf = (r: number) => (c.mode === 'uneven' ? 5 + r : STEPS);
  // biome-ignore lint/suspicious/noExplicitAny: any optimizer's options
  const OptimizerClass = OPTIMIZERS[c.opt] as any;
  const makeZero = (m: ReturnType<typeof makeModel>) =>
    new ZeroRedundancyOptimizer(m.parameters(), OptimizerClass, OPTIONS[c.opt], {
      stage: c.stage,
      parametersAsBucketView: c.bucket ?? false,
    });

  let model = makeModel();
  let zero = makeZero(model);
  // stage 1 needs averaged gradients: DDP (@ddp/reducer) or the test's GradAverager
  const ddp = c.ddp ? await DistributedDataParallel.create(model) : null;
  let averager = c.stage === 1 && !ddp ? new GradAverager(model.parameters(), group) : null;
  const trainStep = async (t: number) => {
    const notified = averager?.startIteration();
    const loss = tidy(() => lossOf(ddp ?? model, t, rank));
    await loss.backward();
    loss.dispose();
    await notified;
    await averager?.average();
    await zero.step();
    if (!c.keepGrads) zero.zeroGrad();
  };

  // the reference: one process, every rank's batch of each step, the full optimizer
  const ref = makeModel();
  const refOpt: Optimizer<{ lr: number }> = new OptimizerClass(ref.parameters(), OPTIONS[c.opt]);
  const maxSteps = Math.max(...Array.from({ length: size }, (_, r) => stepsOf(r)));
  const refStep = async (t: number) => {
    const loss = tidy(() => {
      const active = Array.from({ length: size }, (_, r) => r).filter((r) => stepsOf(r) > t);
      return active
        .map((r) => lossOf(ref, t, r))
        .reduce((a, b) => a.add(b))
        .div(size);
    });
    await loss.backward();
    loss.dispose();
    refOpt.step();
    if (!c.keepGrads) refOpt.zeroGrad();
  };

  const result: Record<string, unknown> = { rank };
  if (c.mode === 'uneven') {
    // two epochs, a join each: the ranks that joined first begin the second from their own gradients (stage 2's
    // replays left the averages there, and the next step added them in; probe DB)
    for (let epoch = 0; epoch < 2; epoch++) {
      await join(ddp ? [ddp, zero] : averager ? [averager, zero] : [zero], async () => {
        for (let t = 0; t < stepsOf(rank); t++) await trainStep(t);
      });
      for (let t = 0; t < maxSteps; t++) await refStep(t);
    }
  } else if (c.mode === 'even') {
    let tensorsAfter5 = 0;
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
    const dir = joinPath(c.dir!, 'ckpt');
    if (rank === 0) {
      const full = zero.stateDict();
      let diff = 0;
      for (const [i, s] of refOpt.stateDict().state) {
        for (const [k, v] of Object.entries(s)) {
          const got = full.state.get(i)?.[k];
          diff = Math.max(
            diff,
            typeof v === 'number'
              ? Math.abs(v - (got as number))
              : maxDiff([...(got as tf.Tensor).dataSync()], [...v.dataSync()]),
          );
        }
      }
      result.consolidatedDiff = diff;
      result.consolidatedEntries = full.state.size;
      await saveCheckpoint(dir, { model, optimizer: zero, step: half });
    } else {
      result.stateDictOffTarget = (() => {
        try {
          zero.stateDict();
          return '';
        } catch (e) {
          return (e as Error).name;
        }
      })();
    }
    await group.barrier().wait();
    // a fresh model and optimizer restored from the checkpoint, as after a restart
    zero.dispose();
    model.dispose();
    model = makeModel();
    zero = makeZero(model);
    // as at the start: stage 2 reduces its own gradients (an averager too reduced them twice; probe AR)
    averager = c.stage === 1 && !ddp ? new GradAverager(model.parameters(), group) : null;
    result.resumedAt = (await loadCheckpoint(dir, { model, optimizer: zero })).step;
    for (let t = half; t < maxSteps; t++) {
      await trainStep(t);
      await refStep(t);
    }
  }
  const params = flatParams(model);
  result.maxDiff = maxDiff(params, flatParams(ref));
  result.hash = createHash('sha256').update(Float32Array.from(params)).digest('hex').slice(0, 16);
  zero.dispose();
  refOpt.dispose();
  model.dispose();
  ref.dispose();
  return result;
}

const cases = JSON.parse(process.argv[2] ?? '[]') as Case[];
const group = await initProcessGroup({ timeoutMs: 30_000 });
const results = [];
for (const c of cases) results.push(await runCase(c, group));
console.log(`RESULT ${JSON.stringify(results)}`);
await destroyProcessGroup();
