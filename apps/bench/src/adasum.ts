/**
 * `pnpm bench adasum`: the same small regression trained on 4 ranks with DDP's averaging
 * all-reduce and with Adasum (Horovod's adaptive summation, @ddp/reducer's adasumHook), at
 * several learning rates. Each rank draws its own mini-batches; the curve is the loss on a fixed
 * held-out set. Writes results/adasum.{json,md,png}.
 */
import { fileURLToPath } from 'node:url';
import { mse, noGrad, type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup, ReduceOp } from '@ddp/comm';
import { Generator, Linear, Sequential, SGD, Tanh } from '@ddp/nn';
import { AdasumState, adasumHook, type CommHook, DistributedDataParallel } from '@ddp/reducer';
import { benchCommand, positiveInt, positiveNumber, rankFlag } from './lib/flags.js';
import { printSample, runSampleWorld } from './lib/world.js';

const [IN, HIDDEN, BATCH, EVAL] = [16, 32, 8, 256];
const MODES = ['average', 'sum', 'adasum'] as const;

/** Horovod's op=Sum: the gradients added, not averaged (what Adasum is an alternative to). */
const sumHook: CommHook = async (_state, bucket) => {
  await bucket.processGroup.allReduce(bucket.buffer, { op: ReduceOp.SUM }).wait();
  return bucket.buffer;
};

interface LossSample {
  mode: (typeof MODES)[number];
  lr: number;
  step: number;
  loss: number;
}

const mlp = (seed: number) => {
  const generator = new Generator(seed);
  return new Sequential(new Linear(IN, HIDDEN, { generator }), new Tanh(), new Linear(HIDDEN, 1, { generator }));
};

/** x ~ N(0, 1) and the teacher network's output: the same function on every rank, each rank its own samples. */
function batchOf(teacher: Sequential, gen: Generator, n: number): { x: Tensor; y: Tensor } {
  const x = tensor(gen.normal(n * IN), [n, IN]);
  const y = noGrad(() => teacher.forward(x));
  return { x, y };
}

async function rank(steps: number, lrs: number[]): Promise<void> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  const teacher = mlp(99);
  const held = batchOf(teacher, new Generator(1234), EVAL);
  for (const lr of lrs) {
    for (const mode of MODES) {
      const model = mlp(7);
      const ddp = await DistributedDataParallel.create(model, { processGroup: group, checkFinite: false });
      if (mode === 'adasum') ddp.registerCommHook(new AdasumState(), adasumHook);
      if (mode === 'sum') ddp.registerCommHook(null, sumHook);
      const optimizer = new SGD(model.parameters(), { lr });
      const gen = new Generator(500 + group.rank);
      for (let step = 0; step <= steps; step++) {
        const heldLoss = noGrad(() => tidy(() => mse(model.forward(held.x), held.y).item()));
        if (group.rank === 0) printSample({ mode, lr, step, loss: heldLoss } satisfies LossSample);
        if (step === steps) break;
        const { x, y } = batchOf(teacher, gen, BATCH);
        const loss = tidy(() => mse(ddp.forward(x), y));
        await loss.backward();
        for (const t of [x, y, loss]) t.dispose();
        optimizer.step();
        optimizer.zeroGrad();
      }
      model.dispose();
    }
  }
  await destroyProcessGroup();
}

async function main(world: number, steps: number, lrs: number[]): Promise<void> {
  const args = [
    '--conditions=@ddp/source',
    '--import',
    'tsx',
    fileURLToPath(import.meta.url),
    '--rank',
    '--steps',
    `${steps}`,
    '--lrs',
    lrs.join(','),
  ];
  const samples = (await runSampleWorld<LossSample>(world, process.execPath, args)).flat();
  // a diverged run's loss is Infinity/NaN: cap it so the plot keeps its scale
  const rows = samples.map((s) => ({
    series: `${s.mode} lr ${s.lr}`,
    step: s.step,
    loss: Number.isFinite(s.loss) ? Math.min(s.loss, 10) : 10,
  }));
  const lossAt = (mode: string, lr: number, step: number) =>
    samples.find((s) => s.mode === mode && s.lr === lr && s.step === step)?.loss ?? Number.NaN;
  // JSON turns a diverged run's NaN into null
  const finals = MODES.flatMap((mode) =>
    lrs.map((lr) => ({ mode, lr, finalLoss: lossAt(mode, lr, steps) ?? Number.NaN })),
  );
  console.table(finals);
  const { writeReport } = await import('@ddp/plot');
  const finalLoss = (f: (typeof finals)[number]) =>
    `${f.mode} lr ${f.lr}: ${Number.isFinite(f.finalLoss) ? f.finalLoss.toPrecision(3) : 'diverged'}`;
  const files = await writeReport(fileURLToPath(new URL('../results', import.meta.url)), 'adasum', rows, {
    meta: { world, steps, batchPerRank: BATCH, model: `MLP ${IN}-${HIDDEN}-1 (tanh), teacher MLP targets`, finals },
    notes:
      `${world} ranks, SGD, ${BATCH} samples per rank per step (each rank its own), loss on ${EVAL} held-out samples ` +
      "(capped at 10 for the plot). average: DDP's all-reduce mean; sum: the gradients added (Horovod op=Sum); " +
      `adasum: adasumHook (per-parameter Adasum, recursive doubling). Initial loss ` +
      `${lossAt('average', lrs[0], 0).toPrecision(3)}. Final losses: ${finals.map(finalLoss).join('; ')}.`,
    chart: {
      x: 'step',
      y: 'loss',
      series: 'series',
      title: `Adasum vs averaging, ${world} ranks (held-out MSE)`,
      logY: true,
    },
  });
  console.log(`wrote ${files.join(', ')}`);
}

const lrList = (v: string) => v.split(',').map((s) => positiveNumber(s));
const flags = benchCommand('adasum', 'Adasum vs averaging: held-out loss curves at several learning rates')
  .option('--world <n>', 'ranks (a power of two)', positiveInt, 4)
  .option('--steps <n>', 'SGD steps per run', positiveInt, 60)
  .option('--lrs <list>', 'learning rates, comma-separated', lrList, [0.1, 0.4, 0.8])
  .addOption(rankFlag())
  .parse()
  .opts<{ world: number; steps: number; lrs: number[]; rank?: boolean }>();
await (flags.rank ? rank(flags.steps, flags.lrs) : main(flags.world, flags.steps, flags.lrs));
