// Test-only: uneven inputs (join) and failure scenarios (rank.child.ts).

import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join as inDir } from 'node:path';
import { markParameterShard, tidy } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import { join } from '@ddp/join';
import { BatchNorm1d, Generator, Linear, loadCheckpoint, mse, Sequential, SGD, saveCheckpoint } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { type CommHook, DistributedDataParallel } from '../index.js';
import { mlp, normal, rows, snapshot } from './models.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/** A user's hook: the bucket averaged over the group, exactly (not the default hook, so join does not rescale it). */
const meanHook: CommHook = async (_state, { buffer, processGroup }) => {
  await processGroup.allReduce(buffer, { op: ReduceOp.AVG }).wait();
  return buffer;
};

const batchesOf = (rank: number) => 5 + rank;
const batch = (rank: number, s: number) => ({
  x: normal([4, 5], 1000 * rank + s),
  y: normal([4, 3], 500 + 1000 * rank + s),
});

/** Rank `rank`'s first `count` batches through `ddp`, an SGD step after each. */
async function trainOn(
  ddp: DistributedDataParallel<Sequential>,
  opt: SGD,
  rank: number,
  count: number,
  setToNone = true,
) {
  for (let s = 0; s < count; s++) {
    const { x, y } = batch(rank, s);
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
    tf.dispose([x, y]);
    opt.step();
    opt.zeroGrad(setToNone);
  }
}

/**
 * Rank r trains on 5 + r batches inside join, for two epochs (a join each); rank 0 also computes what
 * divideByInitialWorldSize prescribes: at step s the gradient is the sum over the ranks
 * still active of their batch's gradient, divided by N (true) or by the active count (false).
 * A joined rank's gradients must be its own again after join (was: the last shadowed step's
 * averages, added into the next epoch's first gradient; probe BP).
 */
async function joinScenario(
  pg: ProcessGroup,
  divideByInitialWorldSize: boolean,
  throwOnEarlyTermination = false,
  hook: CommHook | null = null,
): Promise<Record<string, unknown>> {
  // with a comm hook the flag has no effect (torch's): the hook's result, here a mean over N, is used as it is
  const divideByN = divideByInitialWorldSize || hook !== null;
  const warnings: string[] = [];
  const onWarning = (w: Error & { code?: string }) => warnings.push(w.code ?? '');
  process.on('warning', onWarning);
  let reference: Record<string, number[]> | null = null;
  const steps = batchesOf(pg.size - 1);
  const ranks = [...Array(pg.size).keys()];
  // [batch, ranks active] per step; with throwOnEarlyTermination: the steps before the error, then 2 without join
  const plan = throwOnEarlyTermination
    ? [...[...Array(batchesOf(0)).keys()], 0, 1].map((s) => [s, ranks] as const)
    : [...Array(2 * steps).keys()].map((s) => [s % steps, ranks.filter((r) => batchesOf(r) > s % steps)] as const);
  if (pg.rank === 0) {
    const ref = mlp(31);
    const opt = new SGD(ref.parameters(), { lr: 0.1 });
    for (const [s, active] of plan) {
      for (const r of active) {
        const { x, y } = batch(r, s);
        const loss = tidy(() =>
          mse(ref.forward(rows(x, 0, 4)), rows(y, 0, 4)).div(divideByN ? pg.size : active.length),
        );
        await loss.backward();
        loss.dispose();
        tf.dispose([x, y]);
      }
      opt.step();
      opt.zeroGrad();
    }
    reference = snapshot(ref);
    ref.dispose();
  }
  const model = mlp(31);
  const ddp = await DistributedDataParallel.create(model, { firstBucketMB: 1e-4, bucketCapMB: 1e-4 });
  if (hook) ddp.registerCommHook(null, hook);
  const opt = new SGD(model.parameters(), { lr: 0.1 });
  const gradsAfterJoin: number[] = [];
  const epoch = () =>
    join(
      [ddp],
      // with a hook: zeros kept (torch's set_to_none=False), the join hook's clone path
      () => trainOn(ddp, opt, pg.rank, batchesOf(pg.rank), hook === null),
      { divideByInitialWorldSize, throwOnEarlyTermination },
    );
  if (throwOnEarlyTermination) {
    const error = await epoch().then(
      () => null,
      (e: Error) => e,
    );
    // the group stays usable after the error (a checkpoint can still be saved): torch's does
    const after = Float32Array.of(pg.rank + 1);
    await pg.allReduce(after).wait();
    // from the gradients of before the failed step, as torch's error in forward leaves them: its local gradient
    // stayed in .grad (the error skipped zeroGrad) and was averaged into the next step (7e-2 off; probe DB)
    await trainOn(ddp, opt, pg.rank, 2);
    const result = { earlyTermination: error?.name, message: error?.message, sumAfter: after[0] };
    return { ...result, params: snapshot(model), reference };
  }
  for (let e = 0; e < 2; e++) {
    await epoch();
    gradsAfterJoin.push(
      ...model.parameters().map((p) => (p.grad ? Math.max(...[...p.grad.dataSync()].map(Math.abs)) : 0)),
    );
  }
  await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
  process.off('warning', onWarning);
  return { params: snapshot(model), reference, iterations: ddp.iteration, warnings, gradsAfterJoin };
}

/**
 * Batch norm under join, rank r with 2 + r batches: each step's buffers come from the highest
 * rank still training (torch's), which is the last rank throughout, and so does the final model:
 * rank 0 computes its running statistics over the last rank's batches in order.
 */
async function joinBuffers(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const steps = 2 + pg.size - 1;
  const stepBatch = (s: number) => batch(pg.size - 1, s).x; // rank r runs out after step r + 1
  let reference: number[] | null = null;
  if (pg.rank === 0) {
    const norm = new BatchNorm1d(5);
    for (let s = 0; s < steps; s++) {
      const x = stepBatch(s);
      tidy(() => norm.forward(rows(x, 0, 4)));
      x.dispose();
    }
    reference = [...norm.buffers()[0].dataSync()];
    norm.dispose();
  }
  const model = new Sequential(new BatchNorm1d(5), new Linear(5, 3, { generator: new Generator(41) }));
  const ddp = await DistributedDataParallel.create(model);
  const opt = new SGD(model.parameters(), { lr: 0.1 });
  await join([ddp], () => trainOn(ddp, opt, pg.rank, 2 + pg.rank));
  return { runningMean: [...model.buffers()[0].dataSync()], reference };
}

/** Without join, rank 0 runs out of batches first and goes on to a barrier (or, `exits`, leaves). */
async function unevenWithoutJoin(pg: ProcessGroup, exits = false): Promise<Record<string, unknown>> {
  const model = mlp(32);
  const ddp = await DistributedDataParallel.create(model);
  for (let s = 0; s < 2 + pg.rank; s++) {
    const { x, y } = batch(pg.rank, s);
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
    tf.dispose([x, y]);
  }
  if (!exits) await pg.barrier().wait();
  return {};
}

/** Rank 1 builds a wider hidden layer. */
async function shapeMismatch(pg: ProcessGroup): Promise<Record<string, unknown>> {
  await DistributedDataParallel.create(mlp(33, [5, pg.rank === 1 ? 9 : 8, 3]));
  return {};
}

/**
 * Each rank loads its module from another save (its own newest entry: a save committed between the
 * loads), then DDP is made over it; and only rank 0 loads one (its weights are broadcast: allowed).
 */
async function loadedOtherSaves(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const dir = inDir(tmpdir(), `ddp-loaded-saves-${process.env.MASTER_PORT}`);
  if (pg.rank === 0) for (const step of [1, 2]) await saveCheckpoint(inDir(dir, `${step}`), { model: mlp(36), step });
  await pg.barrier().wait();
  const create = async (from: string | null) => {
    const model = mlp(37);
    if (from !== null) await loadCheckpoint(inDir(dir, from), { model });
    try {
      await DistributedDataParallel.create(model);
      return 'created';
    } catch (e) {
      return `${(e as Error).name}: ${(e as Error).message}`;
    }
  };
  const mixed = await create(`${(pg.rank % 2) + 1}`);
  const rank0Only = await create(pg.rank === 0 ? '1' : null);
  await pg.barrier().wait();
  if (pg.rank === 0) await rm(dir, { recursive: true, force: true });
  return { mixed, rank0Only };
}

/**
 * Ranks 0 and 1 hold the two parts of a tensor-parallel shard of "0.weight" (rank 2 a whole one),
 * and DDP is made over the world instead of a data-parallel group.
 */
async function shardSpanning(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(35);
  const weight = model.namedParameters().find(([name]) => name === '0.weight')![1];
  markParameterShard(weight, pg.rank < 2 ? { ranks: [0, 1], rank: pg.rank } : { ranks: [2], rank: 0 });
  await DistributedDataParallel.create(model);
  return {};
}

/** Rank 1's input holds a NaN: checkFinite names the parameter on every rank. */
async function nonFinite(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(34);
  const ddp = await DistributedDataParallel.create(model, { checkFinite: true });
  const x = tf.tensor2d([[pg.rank === 1 ? Number.NaN : 1, 2, 3, 4, 5]]);
  const loss = tidy(() => mse(ddp.forward(rows(x, 0, 1)), rows(tf.zeros([1, 3]), 0, 1)));
  x.dispose();
  try {
    await loss.backward();
  } finally {
    loss.dispose();
  }
  return {};
}

export const joinScenarios: Record<string, Scenario> = {
  joinInitial: (pg) => joinScenario(pg, true),
  joinActive: (pg) => joinScenario(pg, false),
  joinActiveHook: (pg) => joinScenario(pg, false, false, meanHook),
  joinThrow: (pg) => joinScenario(pg, true, true),
  joinBuffers,
  unevenWithoutJoin: (pg) => unevenWithoutJoin(pg, false),
  unevenExit: (pg) => unevenWithoutJoin(pg, true),
  shapeMismatch,
  loadedOtherSaves,
  shardSpanning,
  nonFinite,
};
