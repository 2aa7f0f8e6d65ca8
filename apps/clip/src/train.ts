// CLIP-style contrastive training on two-digit MNIST, one process per rank (ddp-run).

import { randomUUID } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { GradScaler, type GradScalerStateDict } from '@ddp/amp';
import { autocast, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { clampLogitScale_, clipLoss } from '@ddp/contrastive';
import { AdamW, Generator, latestCheckpoint, loadCheckpoint, saveCheckpoint, WarmupCosineLR } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { SingleBar } from 'cli-progress';
import { Command, InvalidArgumentError, Option } from 'commander';
import { GlobalBatchSampler } from './batches.js';
import { DigitPairs } from './data.js';
import { dumpRun } from './dump.js';
import { zeroShotTop1 } from './eval.js';
import { MetricsLog } from './metrics.js';
import { ClipModel } from './model.js';
import { checkSameOptions, type ResumedOptions, ResumeError, refuseToReplace, savedOptions } from './resume.js';

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`expected a non-negative integer, got '${v}'`);
  return n;
};
const atLeastOne = (v: string) => {
  const n = int(v);
  if (n < 1) throw new InvalidArgumentError(`expected an integer >= 1, got '${v}'`);
  return n;
};
const positive = (v: string) => {
  const n = Number(v);
  if (!(n > 0 && Number.isFinite(n))) throw new InvalidArgumentError(`expected a finite positive number, got '${v}'`);
  return n;
};

const ampDtypes = { bf16: 'bfloat16', fp16: 'float16' } as const;
const ampDtype = (v: string) => {
  if (!Object.hasOwn(ampDtypes, v)) throw new InvalidArgumentError(`expected bf16 or fp16, got '${v}'`);
  return ampDtypes[v as keyof typeof ampDtypes];
};

const opts = new Command('clip-train')
  .description('Train a tiny CLIP on two-digit MNIST pairs; run through ddp-run for several ranks.')
  .option('--steps <n>', 'optimizer steps', atLeastOne, 150)
  .option('--batch-size <n>', 'global batch per micro-batch, split over the ranks (contrastive negatives)', int, 256)
  .option('--lr <x>', 'peak learning rate (AdamW, linear warm-up then cosine)', positive, 2e-3)
  .option('--grad-accum <k>', 'micro-batches per optimizer step', atLeastOne, 1)
  .option('--checkpoint-every <n>', 'save every n optimizer steps (0: only at the end)', int, 50)
  .option('--checkpoint-dir <dir>', 'checkpoint directory', 'runs/clip/checkpoint')
  .option('--amp <dtype>', 'mixed precision: bf16 or fp16 (autocast around the forward, GradScaler)', ampDtype)
  .option('--grad-checkpointing', 'recompute activations in backward instead of keeping them', false)
  .addOption(
    new Option('--resume', 'continue from the checkpoint in --checkpoint-dir, if there is one')
      .default(false)
      .conflicts('overwrite'),
  )
  .option('--overwrite', 'start afresh even if --checkpoint-dir holds a checkpoint (its next save removes it)', false)
  .option('--seed <n>', 'seed of the weights and of the data order', int, 0)
  .option('--eval-every <n>', 'zero-shot evaluation every n optimizer steps (0: only at the end)', int, 50)
  .option('--eval-size <n>', 'held-out test pairs evaluated', int, 2000)
  .option('--out <dir>', 'where metrics.jsonl and curves.png go', 'runs/clip')
  .option(
    '--exit-after <n>',
    'stop after n optimizer steps of this run, checkpointing first (a planned interruption)',
    int,
  )
  .option(
    '--dump-init <dir>',
    'write the initial weights, every batch and the settings there, then exit without training',
  )
  // `pnpm clip -- --steps 9` hands the script a literal `--` first: not an end of options here
  .parse(process.argv.filter((a, i) => !(i === 2 && a === '--')))
  .opts<{
    steps: number;
    batchSize: number;
    lr: number;
    gradAccum: number;
    checkpointEvery: number;
    checkpointDir: string;
    gradCheckpointing: boolean;
    resume: boolean;
    overwrite: boolean;
    seed: number;
    evalEvery: number;
    evalSize: number;
    out: string;
    exitAfter?: number;
    dumpInit?: string;
    amp?: 'bfloat16' | 'float16';
  }>();

/**
 * An option that cannot run, found once the world is known: every rank finds it, prints it as the
 * parser prints its own errors (was an uncaught error's stack trace) and exits with its code 2.
 */
function refuseOption(message: string): never {
  console.error(`error: ${message}`);
  process.exit(2);
}

const group = await initProcessGroup();
const rank = group.rank;
const world = group.size;
if (opts.batchSize < world || opts.gradAccum < 1)
  refuseOption(`--batch-size (${opts.batchSize}) must be ≥ the world size (${world}) and --grad-accum ≥ 1`);

const generator = new Generator(opts.seed);
const model = new ClipModel({ generator, gradCheckpointing: opts.gradCheckpointing });
const params = model.parameters();
// CLIP's recipe: no weight decay on gains, biases and the temperature
const optimizer = new AdamW(
  [
    { params: params.filter((p) => p.rank >= 2), weightDecay: 0.1 },
    { params: params.filter((p) => p.rank < 2), weightDecay: 0 },
  ],
  { lr: opts.lr, betas: [0.9, 0.98], eps: 1e-6 },
);
const scheduler = new WarmupCosineLR(optimizer, {
  warmupSteps: Math.max(1, Math.round(opts.steps * 0.1)),
  totalSteps: opts.steps,
  minLr: opts.lr * 0.05,
});

// the scaler agrees on skipping a step across the ranks; GradScaler({ enabled: false }) is a no-op
const scaler = new GradScaler({ enabled: opts.amp !== undefined, processGroup: group });
let step = 0;
/** This run's id, in its checkpoints and its metrics rows: a resumed run keeps the one it continues. */
let run: string | null = randomUUID().slice(0, 8);
const stream: ResumedOptions = {
  seed: opts.seed,
  batchSize: opts.batchSize,
  gradAccum: opts.gradAccum,
  lr: opts.lr,
  steps: opts.steps,
  amp: opts.amp ?? 'none',
};
// a fresh run's first save removes the older entries: another run's checkpoint would go, silently
if (!opts.resume && !opts.overwrite) await refuseToReplace(opts.checkpointDir, rank);
/**
 * The entry this run last saved or resumed from: each save commits only while it is still the newest
 * (another run saving into the directory had its checkpoints deleted, both exiting 0). undefined: any
 * (--overwrite's first save, or a checkpoint of the old layout).
 */
let newestSaved: string | null | undefined = opts.overwrite && !opts.resume ? undefined : null;
// DDP's create broadcasts rank 0's weights; a resumed run loads the same checkpoint on every rank first
if (opts.resume && (await latestCheckpoint(opts.checkpointDir)) !== null) {
  const loaded = await loadCheckpoint(opts.checkpointDir, { model, optimizer, scheduler, generator });
  checkSameOptions(savedOptions(loaded.extra), stream, loaded.path, rank);
  step = loaded.step;
  newestSaved = dirname(resolve(loaded.path)) === resolve(opts.checkpointDir) ? loaded.path : undefined;
  const extra = loaded.extra as { scaler?: GradScalerStateDict; run?: string } | null;
  if (extra?.scaler) scaler.loadStateDict(extra.scaler);
  run = extra?.run ?? null; // checkpoints written before runs had ids: no metrics check
  if (rank === 0) console.log(`resumed from ${loaded.path} at step ${step}`);
}

// under GradScaler an inf gradient is expected now and then: the scaler skips that step
const ddp = await DistributedDataParallel.create(model, { processGroup: group, checkFinite: opts.amp === undefined });
const train = DigitPairs.load('train');
const test = DigitPairs.load('test');
if (opts.evalSize < 1 || opts.evalSize > test.length)
  refuseOption(`--eval-size (${opts.evalSize}) must be from 1 to the ${test.length} test pairs`);
const sampler = new GlobalBatchSampler(train.length, opts.batchSize, rank, world, opts.seed);
// epoch e's order is drawn from seed + e: checked now, not when the last epoch starts
const lastEpoch = sampler.position(opts.steps * opts.gradAccum - 1).epoch;
if (!Number.isSafeInteger(opts.seed + lastEpoch))
  refuseOption(
    `--seed ${opts.seed}: the data order of epoch ${lastEpoch} is drawn from seed + epoch, which must stay below 2^53`,
  );
if (opts.dumpInit !== undefined) {
  const { steps, gradAccum, batchSize, seed, evalEvery, evalSize, checkpointEvery } = opts;
  const run = { world, steps, gradAccum, batchSize, seed, evalEvery, evalSize, checkpointEvery };
  if (rank === 0)
    console.log(
      `wrote ${(await dumpRun(opts.dumpInit, { model, optimizer, scheduler, train, test, run })).join(', ')}`,
    );
  await group.barrier().wait();
  model.dispose();
  optimizer.dispose();
  await destroyProcessGroup();
  process.exit(0);
}
const metrics = new MetricsLog(opts.out, { run: run ?? randomUUID().slice(0, 8), checkpointDir: opts.checkpointDir });
// rank 0 keeps the metrics; every rank stops when it refuses them (the others would wait in the first all-reduce)
const refused = Int32Array.of(0);
if (rank === 0) {
  try {
    metrics.checkRows(step > 0 ? { step, run } : null, opts.overwrite);
  } catch (error) {
    refused[0] = 1;
    console.error(`${(error as Error).name}: ${(error as Error).message}`);
  }
}
await group.allReduce(refused).wait();
if (refused[0] !== 0) throw new ResumeError(`rank ${rank}: rank 0 refused --out ${opts.out} (its message above)`);
if (rank === 0) await metrics.open(step > 0 ? step : null);

async function checkpointNow(): Promise<void> {
  if (rank === 0) {
    const position = sampler.position(step * opts.gradAccum);
    const contents = { model, optimizer, scheduler, generator, step, epoch: position.epoch };
    const extra = { sampler: position, stream, scaler: scaler.stateDict(), run: metrics.run };
    await metrics.flush(); // the rows up to this step are on disk before the checkpoint says they are
    newestSaved = await saveCheckpoint(opts.checkpointDir, { ...contents, extra }, { expectNewest: newestSaved });
  }
  await group.barrier().wait();
}

async function evaluate(): Promise<void> {
  const top1 = await zeroShotTop1(model, test, opts.evalSize, group);
  if (rank === 0) {
    metrics.append({ step, zeroShotTop1: top1 });
    bar?.update(step, { top1: (100 * top1).toFixed(1) });
  }
}

const bar =
  rank === 0
    ? new SingleBar({
        format: 'step {value}/{total} |{bar}| loss {loss} | {sps} samples/s | zero-shot {top1}% | ETA {eta_formatted}',
        noTTYOutput: true,
        notTTYSchedule: 5000,
        etaBuffer: 20,
      })
    : null;
bar?.start(opts.steps, step, { loss: '-', sps: '-', top1: '-' });

const lastStep = Math.min(opts.steps, opts.exitAfter === undefined ? Infinity : step + opts.exitAfter);
while (step < lastStep) {
  const started = performance.now();
  let lossSum = 0;
  for (let micro = 0; micro < opts.gradAccum; micro++) {
    const u = step * opts.gradAccum + micro;
    const microStep = async () => {
      const { images, tokens } = train.batch(sampler.indices(u));
      const features = tidy(() =>
        autocast({ dtype: opts.amp, enabled: opts.amp !== undefined }, () => ddp.forward(images, tokens)),
      );
      const raw = await clipLoss(features.image, features.text, model.logitScale, { group });
      const loss = tidy(() => scaler.scale(raw.div(opts.gradAccum)));
      raw.dispose();
      features.image.dispose();
      features.text.dispose();
      tf.dispose([images, tokens]);
      await loss.backward(); // the last micro-batch's backward also averages the summed gradients over the ranks
      lossSum += loss.item() / scaler.getScale();
      loss.dispose();
    };
    await (micro < opts.gradAccum - 1 ? ddp.noSync(microStep) : microStep());
  }
  await scaler.step(optimizer);
  scaler.update();
  clampLogitScale_(model.logitScale);
  const lr = optimizer.paramGroups[0].lr;
  scheduler.step();
  optimizer.zeroGrad();
  step++;
  const seconds = (performance.now() - started) / 1000;
  // each rank's clipLoss is its rows' share: the batch's loss is their mean (rank 0's alone was
  // 1-4 % off, and not comparable across world sizes)
  const losses = Float64Array.of(lossSum);
  await group.allReduce(losses).wait();
  const loss = losses[0] / world;
  if (rank === 0) {
    const sps = (opts.batchSize * opts.gradAccum) / seconds;
    metrics.append({
      step,
      loss,
      lr,
      samplesPerSec: Math.round(sps),
      logitScale: Math.exp(model.logitScale.item()),
      numTensors: tf.memory().numTensors,
    });
    bar!.update(step, { loss: loss.toFixed(3), sps: sps.toFixed(0) });
  }
  if ((opts.evalEvery > 0 && step % opts.evalEvery === 0) || step === opts.steps) await evaluate();
  if ((opts.checkpointEvery > 0 && step % opts.checkpointEvery === 0) || step === lastStep) await checkpointNow();
}
bar?.stop();
if (rank === 0) {
  await metrics.close();
  const last = metrics
    .rows()
    .filter((r) => r.zeroShotTop1 !== undefined)
    .at(-1);
  const files = await metrics.plot();
  console.log(
    // the step of that evaluation: with --exit-after it may be older than the run's last step
    `final zero-shot top-1 ${last ? (100 * last.zeroShotTop1!).toFixed(1) : '-'}% after ${last?.step ?? step} ` +
      `steps; wrote ` +
      `${metrics.path}, ${files.join(', ')}`,
  );
}
model.dispose();
optimizer.dispose();
await destroyProcessGroup();
