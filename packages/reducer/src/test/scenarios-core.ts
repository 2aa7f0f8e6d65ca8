// Test-only: DDP scenarios each rank runs (rank.child.ts); rank 0 also trains the single-process reference.

import { fromTf, tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { AdamW, BatchNorm1d, crossEntropy, Generator, Linear, mse, Sequential, SGD } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { BucketCapTuner } from '../autotune.js';
import { type DDPOptions, DistributedDataParallel } from '../index.js';
import { goldenMlp, loadGolden, mlp, normal, rows, shareOf, snapshot, TiedLM, transformer } from './models.js';
import { accumulatedVsReference, branchy, branchyLoss, gradsVsReference } from './unused-reference.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/** One optimizer step of `model` (through `forward`) on x, y with an mse loss, scaled by `scale`. */
async function backwardMse(
  forward: (x: ReturnType<typeof rows>) => ReturnType<typeof rows>,
  x: ReturnType<typeof rows>,
  y: ReturnType<typeof rows>,
  scale = 1,
): Promise<void> {
  const loss = tidy(() => mse(forward(x), y).mul(scale));
  await loss.backward();
  loss.dispose();
  x.dispose();
  y.dispose();
}

async function golden(pg: ProcessGroup, naive: boolean): Promise<Record<string, unknown>> {
  const g = loadGolden();
  const model = goldenMlp(g);
  const { DataParallelNaive } = await import('../index.js');
  const wrapped = naive
    ? await DataParallelNaive.create(model)
    : await DistributedDataParallel.create(model, { firstBucketMB: 1e-4, bucketCapMB: 1e-4 });
  const opt = new SGD(model.parameters(), { lr: 0.1 });
  const X = tf.tensor(g.inputs.X.data, g.inputs.X.shape);
  const Y = tf.tensor(g.inputs.Y.data, g.inputs.Y.shape);
  const [from, to] = shareOf(12, pg.rank, pg.size);
  const steps: Record<string, number[]>[] = [];
  for (let s = 0; s < 3; s++) {
    const xs = tf.squeeze(tf.slice(X, [s], [1]), [0]);
    const ys = tf.squeeze(tf.slice(Y, [s], [1]), [0]);
    await backwardMse((x) => wrapped.forward(x), rows(xs, from, to), rows(ys, from, to));
    tf.dispose([xs, ys]);
    opt.step();
    opt.zeroGrad();
    steps.push(snapshot(model));
  }
  const buckets = naive ? null : (wrapped as DistributedDataParallel).bucketLayout;
  tf.dispose([X, Y]);
  return { steps, buckets };
}

/** 20 AdamW steps of a 2-block transformer; rank 0 also trains the same model on the global batch. */
async function transformerScenario(
  pg: ProcessGroup,
  opts: DDPOptions = { firstBucketMB: 0.002, bucketCapMB: 0.01 },
): Promise<Record<string, unknown>> {
  const B = 6;
  const batch = (s: number) => ({ x: normal([B, 4, 16], 1000 + s), y: normal([B, 4, 4], 2000 + s) });
  const train = async (
    model: Sequential,
    forward: (x: ReturnType<typeof rows>) => ReturnType<typeof rows>,
    from: number,
    to: number,
    onStep?: (s: number) => void,
  ) => {
    const opt = new AdamW(model.parameters(), { lr: 1e-2 });
    for (let s = 0; s < 20; s++) {
      const { x, y } = batch(s);
      await backwardMse(forward, rows(x, from, to), rows(y, from, to));
      tf.dispose([x, y]);
      opt.step();
      opt.zeroGrad();
      onStep?.(s);
    }
    opt.dispose();
  };
  let reference: Record<string, number[]> | null = null;
  if (pg.rank === 0) {
    const ref = transformer(7);
    await train(ref, (x) => ref.forward(x), 0, B);
    reference = snapshot(ref);
    ref.dispose();
  }
  // other ranks start elsewhere: create() broadcasts rank 0's weights
  const model = transformer(pg.rank === 0 ? 7 : 99);
  const ddp = await DistributedDataParallel.create(model, opts);
  const initialLayout = ddp.bucketLayout;
  const numTensors: number[] = [];
  /** How many buckets each iteration after the first had (the autotune's trials change them). */
  const bucketsPerStep: number[] = [];
  const [from, to] = shareOf(B, pg.rank, pg.size);
  await train(
    model,
    (x) => ddp.forward(x),
    from,
    to,
    (s) => {
      if (s === 4 || s === 19) numTensors.push(tf.memory().numTensors);
      bucketsPerStep.push(ddp.bucketLayout.length);
    },
  );
  return {
    params: snapshot(model),
    reference,
    initialLayout,
    rebuiltLayout: ddp.bucketLayout,
    numTensors,
    tuning: ddp.bucketCapTuning,
    capMB: ddp.bucketCapMB,
    bucketsPerStep,
  };
}

/** 4 micro-batches (3 under noSync) then one SGD step, twice; rank 0's reference steps on the concatenated batch. */
async function noSyncScenario(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const N = 24;
  const data = (s: number) => ({ x: normal([N, 5], 300 + s), y: normal([N, 3], 400 + s) });
  let reference: Record<string, number[]> | null = null;
  if (pg.rank === 0) {
    const ref = mlp(5);
    const opt = new SGD(ref.parameters(), { lr: 0.1, momentum: 0.9 });
    for (let s = 0; s < 2; s++) {
      const { x, y } = data(s);
      await backwardMse((t) => ref.forward(t), rows(x, 0, N), rows(y, 0, N));
      tf.dispose([x, y]);
      opt.step();
      opt.zeroGrad();
    }
    reference = snapshot(ref);
  }
  const model = mlp(5);
  const ddp = await DistributedDataParallel.create(model);
  const opt = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
  const [from, to] = shareOf(N, pg.rank, pg.size);
  const micro = (to - from) / 4;
  for (let s = 0; s < 2; s++) {
    const { x, y } = data(s);
    for (let k = 0; k < 4; k++) {
      const step = () =>
        backwardMse(
          (t) => ddp.forward(t),
          rows(x, from + k * micro, from + (k + 1) * micro),
          rows(y, from + k * micro, from + (k + 1) * micro),
          1 / 4,
        );
      if (k < 3) await ddp.noSync(step);
      else await step();
    }
    tf.dispose([x, y]);
    opt.step();
    opt.zeroGrad();
  }
  return { params: snapshot(model), reference };
}

export const coreScenarios: Record<string, Scenario> = {
  golden: (pg) => golden(pg, false),
  goldenNaive: (pg) => golden(pg, true),
  transformer: (pg) => transformerScenario(pg),
  transformerAutotune: (pg) =>
    transformerScenario(pg, { firstBucketMB: 0.002, bucketCapCandidatesMB: [0.004, 0.01, 1] }),
  noSync: noSyncScenario,
  unusedError: (pg) =>
    gradsVsReference(
      pg,
      branchy(() => false),
      branchyLoss,
      false,
    ),
  unusedFound: (pg) =>
    gradsVsReference(
      pg,
      branchy(() => false),
      branchyLoss,
      true,
    ),
  unusedOnSomeRanks: (pg) =>
    gradsVsReference(
      pg,
      branchy((r) => r === 1),
      branchyLoss,
      true,
    ),
  // extra used under noSync everywhere, in the synced backward on rank 1 / nowhere; under noSync on rank 0 alone
  unusedAfterNoSync: async (pg) => ({
    cases: [
      await accumulatedVsReference(pg, (r, micro) => micro === 0 || r === 1),
      await accumulatedVsReference(pg, (_, micro) => micro === 0),
      await accumulatedVsReference(pg, (r, micro) => micro === 0 && r === 0),
    ],
  }),
  tied: (pg) =>
    gradsVsReference(
      pg,
      () => new TiedLM(3),
      (m, r) => crossEntropy((m as TiedLM).forward([r, 2, 5, 9, r + 1]), [1, 2, 3, 4, r]),
      false,
    ),
};

/** Rank 1 alone uses `extra`, without findUnusedParameters: every rank must raise, none may hang. */
coreScenarios.unusedDivergentError = (pg) =>
  gradsVsReference(
    pg,
    branchy((r) => r === 1),
    branchyLoss,
    false,
  );

/**
 * BatchNorm statistics differ per rank after a forward; a synced backward leaves rank 0's everywhere (unless
 * broadcastBuffers is off). Create copies rank 0's buffers either way, a bool one too (torch's
 * _sync_module_states): each rank starts with its own. Then forwards without backward.
 */
coreScenarios.buffers = async (pg) => {
  const out: Record<string, unknown> = {};
  for (const broadcastBuffers of [true, false]) {
    const norm = new BatchNorm1d(4);
    const model = new Sequential(new Linear(5, 4, { generator: new Generator(40) }), norm);
    for (const b of norm.buffers()) if (b) b.data = tf.fill(b.shape, pg.rank + 1, b.dtype);
    norm.registerBuffer('mask', fromTf(tf.tensor([pg.rank === 0, pg.rank === 0, true], [3], 'bool')));
    const ddp = await DistributedDataParallel.create(model, { broadcastBuffers });
    out[`created ${broadcastBuffers ? 'synced' : 'local'}`] = model
      .namedBuffers()
      .map(([name, b]) => [name, b?.dtype, [...(b?.dataSync() ?? [])]]);
    const x = normal([6, 5], 41 + pg.rank);
    const loss = tidy(() =>
      ddp
        .forward(rows(x, 0, 6))
        .square()
        .mean(),
    );
    await loss.backward();
    loss.dispose();
    out[broadcastBuffers ? 'synced' : 'local'] = [...model.namedBuffers()[0][1].dataSync()];
    if (broadcastBuffers) {
      // a training forward whose backward never ran (a skipped step): the next forward warns once
      // (torch broadcasts there), and syncBuffers gives every rank rank 0's statistics
      const warnings: string[] = [];
      const onWarning = (w: Error & { code?: string }) => w.code === 'DDP_BUFFERS_UNSYNCED' && warnings.push(w.message);
      process.on('warning', onWarning);
      for (let i = 0; i < 3; i++) tidy(() => void ddp.forward(rows(x, 0, 6)));
      out.skipped = [...model.namedBuffers()[0][1].dataSync()];
      await ddp.syncBuffers();
      out.mended = [...model.namedBuffers()[0][1].dataSync()];
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      process.off('warning', onWarning);
      out.warnings = warnings;
    }
    x.dispose();
    model.dispose();
  }
  return out;
};

/**
 * The autotune's agreement with made-up timings: each rank finds another cap fastest; all
 * must keep the cap whose slowest rank is fastest (the third here).
 */
coreScenarios.tunerAgreement = async (pg) => {
  const tuner = new BucketCapTuner([0.004, 0.008, 1]);
  const first = tuner.plan([1000, 1000, 1000, 1000, 1000, 1000], 1);
  const mine = pg.rank === 0 ? [10, 30, 20] : [30, 10, 25];
  const changes: number[] = [];
  // the candidates take turns: step s times candidate s % 3
  for (let step = 0; step < 6; step++) changes.push(await tuner.record(mine[step % 3] + Math.floor(step / 3), pg));
  return { first, changes, result: tuner.result };
};
