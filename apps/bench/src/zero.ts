/**
 * `pnpm bench zero`: peak tensor memory per rank of one training run of a ~50 M-parameter MLP
 * (12 × Linear(2048, 2048), Adam) under plain DDP, DDP + ZeRO stage 1, and ZeRO stage 2
 * (gradients reduced to their owner, no DDP), at 2 and 4 ranks. Peak = tfjs's peakBytes over
 * the whole run (model, gradients, optimizer state, temporaries; comm buffers are plain JS
 * memory and not counted), measured with tf.profile on every rank. Writes results/zero.*.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/zero.ts [--steps 2] [--worlds 2,4]
 */
import { fileURLToPath } from 'node:url';
import { tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, Generator, Linear, mse, type Optimizer, Sequential, type TensorModule } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { optimizerStateBytes, ZeroRedundancyOptimizer } from '@ddp/zero';
import { Option } from 'commander';
import { benchCommand, positiveInt, positiveIntList, rankFlag } from './lib/flags.js';
import { printSample, runSampleWorld } from './lib/world.js';

const WIDTH = 2048;
const LAYERS = 12;
const BATCH = 8;
const MODES = ['ddp', 'zero1', 'zero2'] as const;
type Mode = (typeof MODES)[number];
const MB = 1024 * 1024;

const values = benchCommand('zero', 'memory and step time of DDP against ZeRO stages 1 and 2')
  .option('--steps <n>', 'training steps per run', positiveInt, 2)
  .option('--worlds <n,…>', 'world sizes', positiveIntList, [2, 4])
  .addOption(new Option('--mode <mode>', "a rank's mode").choices(MODES).default('ddp').hideHelp())
  .addOption(rankFlag())
  .parse()
  .opts<{ steps: number; worlds: number[]; mode: Mode; rank?: boolean }>();

interface RankSample {
  rank: number;
  params: number;
  peakBytes: number;
  stateBytes: number;
  seconds: number;
}

/** One rank: build the model, train `steps` steps in the given mode under tf.profile. */
async function rankMain(mode: Mode, steps: number): Promise<void> {
  const group = await initProcessGroup({ timeoutMs: 600_000 });
  const gen = new Generator(0);
  const layers: TensorModule[] = Array.from({ length: LAYERS }, () => new Linear(WIDTH, WIDTH, { generator: gen }));
  const model = new Sequential(...layers);
  const params = model.parameters().reduce((n, p) => n + p.size, 0);
  const t0 = performance.now();
  let stateBytes = 0;
  const profile = await tf.profile(async () => {
    const ddp = mode === 'zero2' ? null : await DistributedDataParallel.create(model);
    const optimizer: Optimizer<{ lr: number }> =
      mode === 'ddp'
        ? new Adam(model.parameters(), { lr: 1e-4 })
        : new ZeroRedundancyOptimizer(model.parameters(), Adam, { lr: 1e-4 }, { stage: mode === 'zero1' ? 1 : 2, processGroup: group });
    const data = new Generator(100 + group.rank);
    for (let s = 0; s < steps; s++) {
      const x = tensor(data.normal(BATCH * WIDTH), [BATCH, WIDTH]);
      const y = tensor(data.normal(BATCH * WIDTH), [BATCH, WIDTH]);
      const loss = tidy(() => mse((ddp ?? model).forward(x), y));
      await loss.backward();
      loss.dispose();
      x.dispose();
      y.dispose();
      await optimizer.step();
      optimizer.zeroGrad();
    }
    stateBytes = optimizerStateBytes(optimizer instanceof ZeroRedundancyOptimizer ? optimizer.optim : optimizer);
    return [];
  });
  const sample: RankSample = { rank: group.rank, params, peakBytes: profile.peakBytes, stateBytes, seconds: (performance.now() - t0) / 1000 };
  printSample(sample);
  await destroyProcessGroup();
}

/** Starts `world` rank processes of this file; resolves with every rank's sample. */
async function runWorld(world: number, mode: Mode, steps: number): Promise<RankSample[]> {
  const args = ['--conditions=@ddp/source', '--import', 'tsx', fileURLToPath(import.meta.url), '--rank', '--mode', mode, '--steps', `${steps}`];
  const ranks = await runSampleWorld<RankSample>(world, process.execPath, args);
  return ranks.map((samples, rank) => {
    if (!samples[0]) throw new Error(`${mode} rank ${rank}/${world} printed no sample`);
    return samples[0];
  });
}

async function main(): Promise<void> {
  const { steps, worlds } = values;
  const rows = [];
  const samples: Record<string, RankSample[]> = {};
  for (const world of worlds) {
    for (const mode of MODES) {
      const ranks = await runWorld(world, mode, steps);
      samples[`${mode}@${world}`] = ranks;
      const peak = Math.max(...ranks.map((r) => r.peakBytes));
      const state = Math.max(...ranks.map((r) => r.stateBytes));
      rows.push({
        ranks: world,
        mode,
        params: ranks[0]!.params,
        peakMBPerRank: Math.round((peak / MB) * 10) / 10,
        optimizerStateMBPerRank: Math.round((state / MB) * 10) / 10,
        seconds: Math.round(Math.max(...ranks.map((r) => r.seconds)) * 10) / 10,
      });
      console.log(JSON.stringify(rows.at(-1)));
    }
  }
  const { writeReport } = await import('@ddp/plot');
  const outDir = fileURLToPath(new URL('../results', import.meta.url));
  const files = await writeReport(outDir, 'zero', rows, {
    meta: { model: `${LAYERS} × Linear(${WIDTH}, ${WIDTH})`, optimizer: 'Adam', batch: BATCH, steps, backend: tf.getBackend(), samples },
    notes:
      `Peak tensor memory per rank (max over ranks, tf.profile peakBytes over ${steps} training steps, Adam) of a ` +
      `${LAYERS} × Linear(${WIDTH}, ${WIDTH}) MLP. ddp: DistributedDataParallel + Adam on every rank; zero1: DDP + ` +
      'ZeroRedundancyOptimizer stage 1; zero2: ZeroRedundancyOptimizer stage 2 on the bare model (gradients reduced to ' +
      'their owner in backward). Communication buffers are JS memory and not counted.',
    chart: { x: 'ranks', y: 'peakMBPerRank', series: 'mode', title: 'ZeRO: peak tensor memory per rank (MB)' },
  });
  console.log(files.join('\n'));
}

if (values.rank) await rankMain(values.mode, values.steps);
else await main();
