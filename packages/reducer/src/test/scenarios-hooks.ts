// Test-only: communication hook scenarios (rank.child.ts).

import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tidy } from '@ddp/autograd';
import { getWireStats, type ProcessGroup } from '@ddp/comm';
import { loadCheckpoint, mse, type Sequential, SGD, saveCheckpoint } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import {
  allreduceHook,
  bf16CompressHook,
  type CommHook,
  DistributedDataParallel,
  fp16CompressHook,
  type InPlaceCommHook,
  loadPowerSGDState,
  PowerSGDState,
  powerSGDHook,
  savePowerSGDState,
} from '../index.js';
import { gradSnapshot, mlp, normal, rows, shareOf, snapshot } from './models.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/**
 * `iterations` synced backwards of a fresh model under `hook`, the loss scaled by `scale`: the last
 * one's averaged gradients and the bytes this rank put on the wire meanwhile.
 */
async function gradsWith(
  pg: ProcessGroup,
  makeModel: () => Sequential,
  rowsTotal: number,
  hook: CommHook<unknown> | InPlaceCommHook<unknown>,
  state: unknown = null,
  { scale = 1, iterations = 1 } = {},
) {
  const model = makeModel();
  const ddp = await DistributedDataParallel.create(model);
  ddp.registerCommHook(state, hook);
  const [from, to] = shareOf(rowsTotal, pg.rank, pg.size);
  const inDim = model.parameters()[0].shape[1];
  const outDim = model.parameters().at(-1)!.shape[0];
  const x = normal([rowsTotal, inDim], 77);
  const y = normal([rowsTotal, outDim], 78);
  let bytes = 0;
  for (let i = 0; i < iterations; i++) {
    model.zeroGrad();
    const loss = tidy(() => mse(ddp.forward(rows(x, from, to)), rows(y, from, to)).mul(scale));
    const before = getWireStats().bytesSent;
    await loss.backward();
    bytes = getWireStats().bytesSent - before;
    loss.dispose();
  }
  tf.dispose([x, y]);
  const grads = gradSnapshot(model);
  model.dispose();
  return { grads, bytes };
}

async function compressionScenario(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const make = () => mlp(21, [32, 64, 16]);
  const out: Record<string, unknown> = {};
  for (const [name, hook] of [
    ['allreduce', allreduceHook],
    ['fp16', fp16CompressHook],
    ['bf16', bf16CompressHook],
  ] as const)
    out[name] = await gradsWith(pg, make, 12, hook);
  return out;
}

/** Gradients of rank ≤ 4 (4 rows in the global batch): PowerSGD of rank 4 is exact. */
async function powerSGDExact(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const make = () => mlp(22, [64, 64, 64]);
  const exact = await gradsWith(pg, make, 6, allreduceHook);
  const power = await gradsWith(
    pg,
    make,
    6,
    powerSGDHook as CommHook<unknown>,
    new PowerSGDState({ matrixApproximationRank: 6, startPowerSGDIter: 0 }),
  );
  // warm start over 4 iterations, gradients ~1e-7: the factors' scale must not matter
  const scaled = { scale: 1e-6, iterations: 4 };
  const tinyExact = await gradsWith(pg, make, 6, allreduceHook, null, scaled);
  const state = new PowerSGDState({ matrixApproximationRank: 6, startPowerSGDIter: 0 });
  const tinyPower = await gradsWith(pg, make, 6, powerSGDHook as CommHook<unknown>, state, scaled);
  // 4 × 4 layers: not worth compressing at rank 1 (16 elements, 8 in the factors, torch's rate 2)
  const small = () => mlp(24, [4, 4, 4]);
  const smallExact = await gradsWith(pg, small, 6, allreduceHook);
  const smallState = new PowerSGDState({ matrixApproximationRank: 1, startPowerSGDIter: 0 });
  const smallPower = await gradsWith(pg, small, 6, powerSGDHook as CommHook<unknown>, smallState);
  return { exact, power, tinyExact, tinyPower, smallExact, smallPower };
}

/** Rank-1 PowerSGD with error feedback and warm start trains a regression: loss falls, ranks agree. */
async function powerSGDTrain(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(23, [16, 32, 8]);
  const ddp = await DistributedDataParallel.create(model);
  ddp.registerCommHook(new PowerSGDState({ matrixApproximationRank: 1, startPowerSGDIter: 2 }), powerSGDHook);
  const opt = new SGD(model.parameters(), { lr: 0.2, momentum: 0.5 });
  const x = normal([12, 16], 90);
  const y = normal([12, 8], 91);
  const [from, to] = shareOf(12, pg.rank, pg.size);
  const losses: number[] = [];
  const numTensors: number[] = [];
  for (let s = 0; s < 30; s++) {
    const loss = tidy(() => mse(ddp.forward(rows(x, from, to)), rows(y, from, to)));
    await loss.backward();
    losses.push(loss.item());
    loss.dispose();
    opt.step();
    opt.zeroGrad();
    if (s === 9 || s === 29) numTensors.push(tf.memory().numTensors);
  }
  tf.dispose([x, y]);
  return { losses, params: snapshot(model), numTensors };
}

/**
 * PowerSGD (error feedback, warm start, from iteration 0) trained 12 steps twice: its buckets laid
 * out once (after the rebuild), and moved every iteration by the autotune's trials. The state
 * follows each parameter, so both must land on the same parameters (was: each new bucket started
 * afresh, error and Q lost, and its Q drawn per bucket).
 */
async function powerSGDRelayout(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [name, opts] of [
    ['fixed', { bucketCapMB: 1, firstBucketMB: 0.0001 }],
    ['tuned', { bucketCapCandidatesMB: [0.0001, 0.002, 1], firstBucketMB: 0.0001 }],
  ] as const) {
    const model = mlp(23, [16, 32, 8]);
    const ddp = await DistributedDataParallel.create(model, opts);
    ddp.registerCommHook(new PowerSGDState({ matrixApproximationRank: 1, startPowerSGDIter: 0 }), powerSGDHook);
    const opt = new SGD(model.parameters(), { lr: 0.2 });
    const x = normal([12, 16], 92);
    const y = normal([12, 8], 93);
    const [from, to] = shareOf(12, pg.rank, pg.size);
    const layouts = new Set<string>();
    for (let s = 0; s < 12; s++) {
      const loss = tidy(() => mse(ddp.forward(rows(x, from, to)), rows(y, from, to)));
      await loss.backward();
      layouts.add(JSON.stringify(ddp.bucketLayout));
      loss.dispose();
      opt.step();
      opt.zeroGrad();
    }
    tf.dispose([x, y]);
    out[name] = { params: snapshot(model), layouts: layouts.size };
    model.dispose();
  }
  return out;
}

/**
 * PowerSGD (rank 1, error feedback, warm start, the bucket cap tuned) trained 8 steps, checkpointed
 * with its state after 4; resumed from there with the state loaded, and with a fresh one: the
 * loaded resume must end on the uninterrupted run's parameters (was: its state was in no checkpoint).
 */
async function powerSGDResume(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const dir = join(tmpdir(), `ddp-powersgd-resume-${process.env.MASTER_PORT}`);
  const stateFile = join(dir, `powersgd-rank${pg.rank}.safetensors`);
  mkdirSync(dir, { recursive: true });
  const x = normal([12, 16], 94);
  const y = normal([12, 8], 95);
  const [from, to] = shareOf(12, pg.rank, pg.size);
  const options = { matrixApproximationRank: 1, startPowerSGDIter: 2 };
  const train = async (resume: 'none' | 'loaded' | 'fresh') => {
    const model = mlp(24, [16, 32, 8]);
    const opt = new SGD(model.parameters(), { lr: 0.2, momentum: 0.9 });
    const state = new PowerSGDState(options);
    let step = 0;
    if (resume !== 'none') {
      ({ step } = await loadCheckpoint(join(dir, 'ckpt'), { model, optimizer: opt }));
      if (resume === 'loaded') await loadPowerSGDState(stateFile, state, { step });
    }
    const ddp = await DistributedDataParallel.create(model, { bucketCapCandidatesMB: [0.0001, 0.002, 1] });
    ddp.registerCommHook(state, powerSGDHook);
    for (; step < 8; step++) {
      if (resume === 'none' && step === 4) {
        if (pg.rank === 0) await saveCheckpoint(join(dir, 'ckpt'), { model, optimizer: opt, step });
        await savePowerSGDState(stateFile, state, { step });
        await pg.barrier().wait();
      }
      const loss = tidy(() => mse(ddp.forward(rows(x, from, to)).mul(step + 1), rows(y, from, to)));
      await loss.backward();
      loss.dispose();
      opt.step();
      opt.zeroGrad();
    }
    const params = snapshot(model);
    model.dispose();
    return params;
  };
  const out = { uninterrupted: await train('none'), loaded: await train('loaded'), fresh: await train('fresh') };
  tf.dispose([x, y]);
  await pg.barrier().wait();
  if (pg.rank === 0) await rm(dir, { recursive: true, force: true });
  return out;
}

/**
 * Six steps; at step 2 rank 1's hook passes a reduce op the group rejects. Both ranks catch
 * each step's error and go on, as a training loop that logs and skips a bad batch would.
 * Every step from 2 on must fail on both ranks (no step may match rank 1's next all-reduce
 * against rank 0's pending one); the result is each step's error name ('ok' for none).
 */
async function hookFailureCaught(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(35);
  const ddp = await DistributedDataParallel.create(model);
  let step = 0;
  ddp.registerCommHook(null, async (_state, bucket) => {
    const op = pg.rank === 1 && step === 2 ? ('median' as 'avg') : 'avg';
    await bucket.processGroup.allReduce(bucket.buffer, { op }).wait();
    return bucket.buffer;
  });
  const opt = new SGD(model.parameters(), { lr: 0.1 });
  const x = normal([4, 5], 36 + pg.rank);
  const y = normal([4, 3], 37 + pg.rank);
  const steps: string[] = [];
  const messages: string[] = [];
  for (step = 0; step < 6; step++) {
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    try {
      await loss.backward();
      opt.step();
      steps.push('ok');
    } catch (e) {
      steps.push((e as Error).name);
      messages.push((e as Error).message);
    } finally {
      loss.dispose();
      opt.zeroGrad();
    }
  }
  tf.dispose([x, y]);
  return { steps, messages };
}

export const hookScenarios: Record<string, Scenario> = {
  compression: compressionScenario,
  powerSGDExact,
  powerSGDTrain,
  powerSGDRelayout,
  powerSGDResume,
  hookFailureCaught,
};
