// Test-only: where DDP's gradients live during the all-reduce (DESIGN.md, "Where gradients live").

import { tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { mse } from '@ddp/nn';
import { getTransferStats, tf } from '@ddp/tensor';
import { IN_PLACE_MIN_ELEMENTS } from '../bucket.js';
import { DistributedDataParallel } from '../index.js';
import { mlp, normal, rows } from './models.js';

type Scenario = (pg: ProcessGroup) => Promise<Record<string, unknown>>;

/**
 * Default hook, different data per rank: each rank's local gradients (under noSync), then
 * what a synchronized step leaves in the gradients, the transfers it counted per step, and
 * whether each gradient is still the tensor backward made. One weight is large enough to be
 * reduced in place. With `keepReshape`, a hook keeps a reshape of that weight's gradient
 * (shared storage: it must not change) and returns the reshape's values after the step.
 */
async function inPlaceStep(pg: ProcessGroup, keepReshape: boolean): Promise<Record<string, unknown>> {
  const model = mlp(11, [5, 13_200, 3]);
  const ddp = await DistributedDataParallel.create(model, { firstBucketMB: 0.1, bucketCapMB: 0.1 });
  const params = model.parameters();
  const large = params.findIndex((p) => p.size >= IN_PLACE_MIN_ELEMENTS);
  const fromBackward = new Map<unknown, unknown>();
  for (const p of params) p.registerPostAccumulateGradHook((q) => void fromBackward.set(q, q.grad));
  const kept: tf.Tensor[] = [];
  if (keepReshape) {
    params[large].registerHook((g) => {
      kept.push(tf.keep(tf.reshape(g, [g.size])));
      return g;
    });
  }
  const x = normal([4, 5], 50 + pg.rank);
  const y = normal([4, 3], 60 + pg.rank);
  const step = async () => {
    const loss = tidy(() => mse(ddp.forward(rows(x, 0, 4)), rows(y, 0, 4)));
    await loss.backward();
    loss.dispose();
  };
  const values = () => params.map((p) => [...(p.grad!.dataSync() as Float32Array)]);
  await step(); // the first iteration rebuilds the buckets
  for (const p of params) p.grad = null;
  tf.dispose(kept.splice(0));
  await ddp.noSync(step);
  const local = values();
  for (const p of params) p.grad = null;
  tf.dispose(kept.splice(0));
  const tensorsBefore = tf.memory().numTensors;
  const before = getTransferStats();
  await step();
  const after = getTransferStats();
  const result = {
    local,
    averaged: values(),
    copiedOut: after.copiedOut - before.copiedOut,
    writtenInPlace: after.writtenInPlace - before.writtenInPlace,
    uploaded: after.uploaded - before.uploaded,
    sizes: params.map((p) => p.size),
    large,
    sameTensors: params.map((p) => p.grad === fromBackward.get(p)),
    newTensors: tf.memory().numTensors - tensorsBefore,
    kept: kept.map((t) => [...(t.dataSync() as Float32Array)]),
  };
  tf.dispose([x, y, ...kept]);
  model.dispose();
  return result;
}

/**
 * One model wrapped twice: the second create is refused while the first lives (both wrappers'
 * hooks reduced the large gradient in place at once: wrong averages on every rank alike); after
 * dispose() it wraps again and 3 SGD steps match one process on the global batch.
 */
async function rewrap(pg: ProcessGroup): Promise<Record<string, unknown>> {
  const model = mlp(11, [5, 13_200, 3]);
  const first = await DistributedDataParallel.create(model);
  const refused = await DistributedDataParallel.create(model).then(
    () => null,
    (error: Error) => `${error.name}: ${error.message}`,
  );
  first.dispose();
  const ddp = await DistributedDataParallel.create(model);
  const reference = mlp(11, [5, 13_200, 3]);
  const x = normal([2 * pg.size, 5], 70);
  const y = normal([2 * pg.size, 3], 80);
  const sgd = (m: typeof model) => {
    // lr 0.001: at 0.1 this wide layer diverges and float32 rounding grows past any tolerance
    for (const p of m.parameters()) p.data = tf.sub(p.data, tf.mul(p.grad!, 0.001));
    for (const p of m.parameters()) p.grad = null;
  };
  for (let step = 0; step < 3; step++) {
    const loss = tidy(() =>
      mse(ddp.forward(rows(x, 2 * pg.rank, 2 * pg.rank + 2)), rows(y, 2 * pg.rank, 2 * pg.rank + 2)),
    );
    await loss.backward();
    loss.dispose();
    sgd(model);
    const whole = tidy(() => mse(reference.forward(rows(x, 0, 2 * pg.size)), rows(y, 0, 2 * pg.size)));
    await whole.backward();
    whole.dispose();
    sgd(reference);
  }
  const [got, want] = [model, reference].map((m) => m.parameters().flatMap((p) => [...p.data.dataSync()]));
  const maxDiff = got.reduce((worst, v, i) => Math.max(worst, Math.abs(v - want[i])), 0);
  ddp.dispose();
  tf.dispose([x, y]);
  model.dispose();
  reference.dispose();
  return { refused, maxDiff };
}

export const storageScenarios: Record<string, Scenario> = {
  inPlace: (pg) => inPlaceStep(pg, false),
  inPlaceSharedStorage: (pg) => inPlaceStep(pg, true),
  rewrap,
};
