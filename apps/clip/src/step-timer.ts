// One process times CLIP training steps without DDP or the optimizer: forward, loss, backward
// (`pnpm bench clip --step` runs it beside PyTorch's). Prints one JSON line: per-step medians of the
// first `steps` timed steps (V8 still compiling the step's JavaScript) and of the last `steps` after
// `warmup` more (steady state, what the first ~100 steps of a run reach).
import { tidy } from '@ddp/autograd';
import { clipLoss } from '@ddp/contrastive';
import { Generator } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { Command, InvalidArgumentError } from 'commander';
import { ClipModel } from './model.js';

const positive = (v: string) => {
  const n = Number(v);
  if (!(Number.isInteger(n) && n > 0)) throw new InvalidArgumentError(`expected a positive integer, got '${v}'`);
  return n;
};
const opts = new Command('clip-step-timer')
  .option('--batch <n>', 'pairs per step', positive, 128)
  .option('--steps <n>', 'steps per median (after 5 untimed)', positive, 30)
  .option('--warmup <n>', 'steps between the early and the steady median', (v) => (v === '0' ? 0 : positive(v)), 100)
  .parse(process.argv.filter((a, i) => !(i === 2 && a === '--')))
  .opts<{ batch: number; steps: number; warmup: number }>();

const generator = new Generator(0);
const model = new ClipModel({ generator });
// MNIST-like images (four pixels in five dark), the same formula as the PyTorch side's
const pixel = (i: number) => (i % 5 === 0 ? ((i * 7919) % 255) / 255 : 0);
const images = tf.tensor4d(
  Float32Array.from({ length: opts.batch * 28 * 56 }, (_, i) => pixel(i)),
  [opts.batch, 1, 28, 56],
);
const tokens = tf.tensor2d(
  Int32Array.from({ length: 2 * opts.batch }, (_, i) => (i * 7) % 10),
  [opts.batch, 2],
  'int32',
);

async function step(): Promise<void> {
  const batch = tf.clone(images); // the model takes ownership of its images, as in training
  const features = tidy(() => model.forward(batch, tokens));
  const loss = await clipLoss(features.image, features.text, model.logitScale);
  features.image.dispose();
  features.text.dispose();
  batch.dispose();
  await loss.backward();
  loss.dispose();
  model.zeroGrad();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (let i = 0; i < 5; i++) await step();
const before = tf.memory().numTensors;
const wallMs: number[] = [];
const cpuMs: number[] = [];
for (let i = 0; i < opts.steps + opts.warmup + opts.steps; i++) {
  const [t, c] = [performance.now(), process.cpuUsage()];
  await step();
  const used = process.cpuUsage(c);
  wallMs.push(performance.now() - t);
  cpuMs.push((used.user + used.system) / 1000);
}
const [early, steady] = [
  (xs: number[]) => median(xs.slice(0, opts.steps)),
  (xs: number[]) => median(xs.slice(-opts.steps)),
];
const leaked = tf.memory().numTensors - before;
console.log(
  JSON.stringify({
    wallMs: steady(wallMs),
    cpuMs: steady(cpuMs),
    earlyWallMs: early(wallMs),
    earlyCpuMs: early(cpuMs),
    leaked,
  }),
);
model.dispose();
tf.dispose([images, tokens]);
