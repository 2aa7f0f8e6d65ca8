/**
 * `pnpm bench data-parallel`: one SGD step of the same MLP at the same global batch three ways,
 * as the data-parallel deck compares them: `single` (one process, the whole batch), `dataParallel`
 * (@ddp/data-parallel: one process, the batch scattered over replica threads, outputs gathered,
 * gradients summed on the main thread, parameters broadcast every step) and `ddp` (@ddp/reducer:
 * one process per rank, half the batch each, bucketed all-reduce overlapping backward). Median
 * step time after warm-up, rounds alternating. Writes results/data-parallel.{json,md,png}.
 */
import { fileURLToPath } from 'node:url';
import { mse, tensor } from '@ddp/autograd';
import { CHARTS } from './lib/charts.js';
import { benchCommand, positiveInt, rankFlag } from './lib/flags.js';
import { median } from './lib/step-stats.js';
import { printSample, runSampleWorld } from './lib/world.js';

const flags = benchCommand(
  'data-parallel',
  'DataParallel (threads, one process) beside DDP (processes) and one process',
)
  .option('--width <n>', 'hidden width of the MLP', positiveInt, 1024)
  .option('--depth <n>', 'layers of the MLP', positiveInt, 4)
  .option('--batch <n>', 'global batch', positiveInt, 64)
  .option('--replicas <n>', 'DataParallel replicas and DDP ranks', positiveInt, 2)
  .option('--steps <n>', 'timed steps per round', positiveInt, 6)
  .option('--rounds <n>', 'rounds over the three ways', positiveInt, 2)
  .addOption(rankFlag('<way>'))
  .parse()
  .opts<{
    width: number;
    depth: number;
    batch: number;
    replicas: number;
    steps: number;
    rounds: number;
    rank?: string;
  }>();
process.env.BENCH_MLP_WIDTH = `${flags.width}`;
process.env.BENCH_MLP_DEPTH = `${flags.depth}`;
const WARMUP = 2;
const factory = new URL('./lib/bench-mlp.ts', import.meta.url);

interface Sample {
  way: string;
  ms: number;
}

/** Times `step` (one forward, backward and SGD update) and returns its median over the timed steps. */
async function timeSteps(step: (i: number) => Promise<void>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < WARMUP + flags.steps; i++) {
    const t0 = performance.now();
    await step(i);
    if (i >= WARMUP) times.push(performance.now() - t0);
  }
  return median(times);
}

/** Deterministic inputs and targets for `rows` rows of the global batch starting at `first`. */
function batch(rows: number, first: number) {
  const inF = flags.width / 2;
  const x = tensor(
    Array.from({ length: rows * inF }, (_, i) => Math.sin(first * inF + i)),
    [rows, inF],
  );
  const y = tensor(
    Array.from({ length: rows * inF }, (_, i) => Math.cos(first * inF + i)),
    [rows, inF],
  );
  return { x, y };
}

async function inProcess(way: 'single' | 'dataParallel'): Promise<number> {
  const { SGD } = await import('@ddp/nn');
  const { createModule } = await import('./lib/bench-mlp.js');
  const { DataParallel } = await import('@ddp/data-parallel');
  const dp = way === 'dataParallel' ? await DataParallel.create(factory, { replicas: flags.replicas }) : null;
  const model = dp?.module ?? createModule();
  const optimizer = new SGD(model.parameters(), { lr: 1e-3 });
  const ms = await timeSteps(async () => {
    const { x, y } = batch(flags.batch, 0);
    const out = dp ? await dp.forward(x) : model.forward(x);
    const loss = mse(out, y);
    await loss.backward();
    optimizer.step();
    optimizer.zeroGrad();
    for (const t of [x, y, out, loss]) t.dispose();
  });
  await dp?.dispose();
  model.dispose();
  return ms;
}

async function ddpRank(): Promise<void> {
  const { destroyProcessGroup, initProcessGroup } = await import('@ddp/comm');
  const { SGD } = await import('@ddp/nn');
  const { DistributedDataParallel } = await import('@ddp/reducer');
  const { createModule } = await import('./lib/bench-mlp.js');
  const group = await initProcessGroup({ timeoutMs: 300_000 });
  const model = createModule();
  const ddp = await DistributedDataParallel.create(model, { processGroup: group });
  const optimizer = new SGD(model.parameters(), { lr: 1e-3 });
  const local = flags.batch / group.size;
  const ms = await timeSteps(async () => {
    const { x, y } = batch(local, group.rank * local);
    const out = ddp.forward(x);
    const loss = mse(out, y);
    await loss.backward();
    optimizer.step();
    optimizer.zeroGrad();
    for (const t of [x, y, out, loss]) t.dispose();
  });
  if (group.rank === 0) printSample({ way: 'ddp', ms } satisfies Sample);
  await destroyProcessGroup();
}

async function runWay(way: string): Promise<number> {
  const args = [
    '--conditions=@ddp/source',
    '--import',
    'tsx',
    fileURLToPath(import.meta.url),
    ...process.argv.slice(2),
    '--rank',
    way,
  ];
  const world = way === 'ddp' ? flags.replicas : 1;
  const samples = (await runSampleWorld<Sample>(world, process.execPath, args))[0];
  return samples[0].ms;
}

async function main(): Promise<void> {
  if (flags.batch % flags.replicas !== 0)
    throw new Error(`--batch (${flags.batch}) must divide by --replicas (${flags.replicas})`);
  const ways = ['single', 'dataParallel', 'ddp'];
  const best: Record<string, number> = {};
  const rows = [];
  for (let round = 1; round <= flags.rounds; round++) {
    for (const way of ways) {
      const ms = await runWay(way);
      best[way] = Math.min(best[way] ?? Number.POSITIVE_INFINITY, ms);
      rows.push({ round, way, stepMs: Math.round(ms * 10) / 10 });
      console.log(JSON.stringify(rows.at(-1)));
    }
  }
  const ratios = ways.map((w) => `${w} ${(best[w] / best.single).toFixed(2)}×`).join(', ');
  const { writeReport } = await import('@ddp/plot');
  const files = await writeReport(fileURLToPath(new URL('../results', import.meta.url)), 'data-parallel', rows, {
    meta: { ...flags, best },
    notes:
      `One SGD step of an MLP (width ${flags.width}, ${flags.depth} layers) at global batch ${flags.batch}: ` +
      `single process; DataParallel with ${flags.replicas} replica threads; DDP on ${flags.replicas} ` +
      `processes. Median of ${flags.steps} steps after ${WARMUP} warm-up, ${flags.rounds} alternating rounds; ` +
      `best round's step time relative to single's: ${ratios}.`,
    chart: CHARTS['data-parallel'].chart({ batch: flags.batch }, rows),
  });
  console.log(`best step ms: ${JSON.stringify(best)} (${ratios})\nwrote ${files.join(', ')}`);
}

if (flags.rank === 'ddp') await ddpRank();
else if (flags.rank)
  printSample({ way: flags.rank, ms: await inProcess(flags.rank as 'single' | 'dataParallel') } satisfies Sample);
else await main();
