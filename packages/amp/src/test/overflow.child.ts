// One rank of the GradScaler multi-process test: rank 1's batch overflows at step OVERFLOW_AT,
// in each setting in turn. Prints RESULT {rank, setting: per step [stepped, scale, weight sum]}.

import { mse, type Tensor, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { join } from '@ddp/join';
import { Generator, Linear, SGD, type SGDOptions } from '@ddp/nn';
import {
  AdasumOptimizer,
  bf16CompressHook,
  type CommHook,
  DistributedDataParallel,
  fp16CompressHook,
} from '@ddp/reducer';
import { type OptimizerClass, ZeroRedundancyOptimizer } from '@ddp/zero';
import { GradScaler, type ScalableOptimizer } from '../index.js';

const STEPS = 5;
const OVERFLOW_AT = 2;
const group = await initProcessGroup({ timeoutMs: 30_000 });

interface Setting {
  /** Rank 1's overflowing input: 1e36 overflows float32; 1e5 × scale 256 overflows only float16. */
  big: number;
  initScale: number;
  ddp: boolean;
  hook?: CommHook;
  zero?: 1 | 2;
  adasum?: boolean;
}
const settings: Record<string, Setting> = {
  // no DDP: each rank sees only its own gradients, so only the scaler's all-reduce makes them agree
  alone: { big: 1e36, initScale: 1024, ddp: false },
  ddp: { big: 1e36, initScale: 1024, ddp: true },
  ddpFp16Hook: { big: 1e5, initScale: 256, ddp: true, hook: fp16CompressHook },
  ddpBf16Hook: { big: 1e36, initScale: 1024, ddp: true, hook: bf16CompressHook },
  zero: { big: 1e36, initScale: 1024, ddp: true, zero: 1 },
  // stage 2 on the bare model: each rank keeps only the gradients it owns, so ranks see different ones
  zero2: { big: 1e36, initScale: 1024, ddp: false, zero: 2 },
  // Horovod's scaler.step(DistributedOptimizer(opt, op=Adasum)): was a TypeError reading its paramGroups
  adasum: { big: 1e36, initScale: 1024, ddp: false, adasum: true },
};

const weightSum = (ps: Tensor[]) =>
  ps.reduce((s, p) => s + Array.from(p.data.dataSync()).reduce((a, b) => a + b, 0), 0);
// SGD wants lr in its options; ZeRO's OptimizerClass allows them all optional (it passes lr)
const sgdClass = SGD as unknown as OptimizerClass<SGDOptions>;

const results: Record<string, [boolean, number, number][]> = {};
for (const [name, s] of Object.entries(settings)) {
  const model = new Linear(4, 2, { generator: new Generator(7) });
  const ddp = s.ddp ? await DistributedDataParallel.create(model, { checkFinite: false }) : null;
  if (ddp && s.hook) ddp.registerCommHook(null, s.hook);
  const params = model.parameters();
  const optimizer: ScalableOptimizer = s.zero
    ? new ZeroRedundancyOptimizer(params, sgdClass, { lr: 0.05 }, { stage: s.zero })
    : s.adasum
      ? new AdasumOptimizer(new SGD(params, { lr: 0.05 }), group)
      : new SGD(params, { lr: 0.05 });
  const scaler = new GradScaler({ initScale: s.initScale, growthInterval: 2, processGroup: group });
  const gen = new Generator(100 + group.rank);
  const steps: [boolean, number, number][] = [];
  for (let step = 0; step < STEPS; step++) {
    const values = gen.normal(12);
    if (group.rank === 1 && step === OVERFLOW_AT) values[5] = s.big;
    const x = tensor(values, [3, 4]);
    const y = tensor([1, 0, 0, 1, 1, 1], [3, 2]);
    for (const p of params) p.grad = null;
    const loss = scaler.scale(mse(ddp ? ddp.forward(x) : model.forward(x), y));
    await loss.backward();
    const stepped = await scaler.step(optimizer);
    scaler.update();
    steps.push([stepped, scaler.getScale(), weightSum(params)]);
    for (const t of [x, y, loss]) t.dispose();
  }
  results[name] = steps;
}
// ZeRO-2's gradients are split over the ranks (as a pipeline stage's): a scaler without a processGroup
// let one rank skip while the other stepped, and their scales drifted apart
const split = new Linear(4, 2, { generator: new Generator(7) });
const splitOptimizer = new ZeroRedundancyOptimizer(split.parameters(), sgdClass, { lr: 0.05 }, { stage: 2 });
const splitLoss = mse(split.forward(tensor(new Generator(3).normal(12), [3, 4])), tensor([1, 0, 0, 1, 1, 1], [3, 2]));
await splitLoss.backward();
const refused = await new GradScaler().step(splitOptimizer).then(
  () => null,
  (error: Error) => `${error.name}: ${error.message}`,
);
// one parameter on 2 ranks: rank 1 owns nothing, holds no gradient, and must refuse alike
const lone = new Linear(4, 2, { bias: false, generator: new Generator(7) });
const loneOptimizer = new ZeroRedundancyOptimizer(lone.parameters(), sgdClass, { lr: 0.05 }, { stage: 2 });
await mse(lone.forward(tensor(new Generator(3).normal(12), [3, 4])), tensor([1, 0, 0, 1, 1, 1], [3, 2])).backward();
const refusedOwningNothing = await new GradScaler().step(loneOptimizer).then(
  () => null,
  (error: Error) => `${error.name}: ${error.message}`,
);

/**
 * Uneven inputs under join (rank 0: 3 batches, rank 1: 2): listed among the joinables, the scaler's
 * agreement is shadowed by the joined rank; not listed, it warns once (even inputs here).
 */
async function joined(listed: boolean): Promise<{ weights: number; warnings: string[]; scale: number }> {
  const model = new Linear(4, 2, { generator: new Generator(7) });
  const ddp = await DistributedDataParallel.create(model, { checkFinite: false });
  const optimizer = new SGD(model.parameters(), { lr: 0.05 });
  // growth every clean step: the scale moves in the step rank 1 shadows
  const scaler = new GradScaler({ initScale: 1024, growthInterval: 1, processGroup: group });
  const warnings: string[] = [];
  const onWarning = (w: Error & { code?: string }) => w.code === 'DDP_SCALER_NOT_JOINED' && warnings.push(w.message);
  process.on('warning', onWarning);
  const gen = new Generator(100 + group.rank);
  await join(listed ? [ddp, scaler] : [ddp], async () => {
    for (let step = 0; step < (listed && group.rank === 0 ? 3 : 2); step++) {
      optimizer.zeroGrad();
      await scaler
        .scale(mse(ddp.forward(tensor(gen.normal(12), [3, 4])), tensor([1, 0, 0, 1, 1, 1], [3, 2])))
        .backward();
      await scaler.step(optimizer);
      scaler.update();
    }
  });
  await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
  process.off('warning', onWarning);
  return { weights: weightSum(model.parameters()), warnings, scale: scaler.getScale() };
}
const underJoin = { listed: await joined(true), unlisted: await joined(false) };
console.log(`RESULT ${JSON.stringify({ rank: group.rank, ...results, refused, refusedOwningNothing, underJoin })}`);
await destroyProcessGroup();
