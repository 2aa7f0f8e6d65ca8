/**
 * `pnpm bench zero`: peak tensor memory per rank of one training run of a ~50 M-parameter MLP
 * (12 × Linear(2048, 2048), Adam) under plain DDP, DDP + ZeRO stage 1, and ZeRO stage 2
 * (gradients reduced to their owner, no DDP), and FSDP (@ddp/fsdp: one unit per Linear, the
 * Sequential root stepping through them; with and without prefetch), at 2 and 4 ranks. Also the
 * mean time of the steps after the first, and for FSDP how long a synchronous sharded checkpoint
 * save takes against how much an AsyncCheckpointer save stalls the steps it overlaps, and the
 * CPU it adds (lib/fsdp-save-stall.ts), also with a core left to the ranks' other threads
 * (fsdp-free-core). Peak = tfjs's peakBytes over the whole run (model, gradients, optimizer
 * state, temporaries; comm buffers are plain JS memory and not counted), measured with
 * tf.profile on every rank. Writes results/zero.*.
 *
 *   node --conditions=@ddp/source --import tsx apps/bench/src/zero.ts [--steps 4] [--worlds 2,4] [--rounds 1]
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type Tensor, tensor, tidy } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { type FSDPModule, fullyShard } from '@ddp/fsdp';
import { Adam, Generator, Linear, mse, type Optimizer, Sequential, type TensorModule } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { tf } from '@ddp/tensor';
import { optimizerStateBytes, ZeroRedundancyOptimizer } from '@ddp/zero';
import { Option } from 'commander';
import { CHARTS } from './lib/charts.js';
import { benchCommand, choiceList, positiveInt, positiveIntList, rankFlag } from './lib/flags.js';
import { checkpointStall, OVERLAPPED_STEPS, SAVE_REPEATS } from './lib/fsdp-save-stall.js';
import { median } from './lib/step-stats.js';
import { printSample, runSampleWorld } from './lib/world.js';

const WIDTH = 2048;
const LAYERS = 12;
const BATCH = 8;
const MODES = ['ddp', 'zero1', 'zero2', 'fsdp', 'fsdp-no-prefetch', 'fsdp-free-core'] as const;
type Mode = (typeof MODES)[number];
const MB = 1024 * 1024;

const values = benchCommand('zero', 'memory and step time of DDP against ZeRO stages 1 and 2 and FSDP')
  .option('--steps <n>', 'training steps per run (the first untimed)', positiveInt, 4)
  .option('--worlds <n,…>', 'world sizes', positiveIntList, [2, 4])
  .option('--modes <m,…>', `modes to run (${MODES.join(', ')})`, choiceList(MODES), [...MODES])
  .option('--threads <n>', 'kernel threads per rank (default: cores ÷ ranks, as ddp-run sets it)', positiveInt)
  .option('--rounds <n>', 'rounds, each running every mode once; ratios to DDP taken within a round', positiveInt, 1)
  .addOption(new Option('--mode <mode>', "a rank's mode").choices(MODES).default('ddp').hideHelp())
  .addOption(rankFlag())
  .parse()
  .opts<{
    steps: number;
    worlds: number[];
    modes: Mode[];
    mode: Mode;
    threads?: number;
    rounds: number;
    rank?: boolean;
  }>();

interface RankSample {
  rank: number;
  params: number;
  peakBytes: number;
  stateBytes: number;
  seconds: number;
  /** Mean time of the steps after the first. */
  stepSeconds: number;
  /** Mean CPU time (every thread of the rank) of the steps after the first: steadier than time on a shared machine. */
  stepCpuSeconds: number;
  /**
   * FSDP: a synchronous checkpoint save; how much longer the steps it overlaps take in all when an async save starts.
   */
  syncSaveSeconds?: number;
  asyncStallSeconds?: number;
  /** From the async save's start until it is committed. */
  asyncSaveSeconds?: number;
  /** How long AsyncCheckpointer.save itself blocks (the host copy): the part of the stall on the main thread. */
  asyncSaveCallSeconds?: number;
  /** CPU the async save window took beyond as many plain steps: on the main thread, and on every other thread. */
  asyncMainCpuSeconds?: number;
  asyncOtherCpuSeconds?: number;
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
  const stepTimes: number[] = [];
  const stepCpu: number[] = [];
  let fsdp: FSDPModule | null = null;
  let optimizer: Optimizer<{ lr: number }> | null = null;
  let ddp: DistributedDataParallel | null = null;
  const data = new Generator(100 + group.rank);
  const step = async () => {
    // every rank starts the clock together: the slowest rank's time held its wait for the others'
    // first step (DDP at 2 ranks 0.549 s, 0.309 s of it the step)
    await group.barrier().wait();
    const started = performance.now();
    const cpu = process.cpuUsage();
    const x = tensor(data.normal(BATCH * WIDTH), [BATCH, WIDTH]);
    const y = tensor(data.normal(BATCH * WIDTH), [BATCH, WIDTH]);
    const wrapped = ddp as DistributedDataParallel | null;
    const out: Tensor = fsdp
      ? await fsdp.forward(x)
      : tidy(() => (wrapped ? (wrapped.forward(x as never) as Tensor) : model.forward(x)));
    const loss = tidy(() => mse(out, y));
    out.dispose();
    await loss.backward();
    loss.dispose();
    x.dispose();
    y.dispose();
    await optimizer!.step();
    optimizer!.zeroGrad();
    const used = process.cpuUsage(cpu);
    stepCpu.push((used.user + used.system) / 1e6);
    return (performance.now() - started) / 1000;
  };
  const profile = await tf.profile(async () => {
    if (mode.startsWith('fsdp')) {
      const opts = { processGroup: group, prefetch: mode !== 'fsdp-no-prefetch' };
      for (const layer of layers) fullyShard(layer, opts);
      fsdp = fullyShard(model, opts);
      optimizer = new Adam(fsdp.parameters(), { lr: 1e-4 });
    } else {
      ddp = mode === 'zero2' ? null : await DistributedDataParallel.create(model);
      optimizer =
        mode === 'ddp'
          ? new Adam(model.parameters(), { lr: 1e-4 })
          : new ZeroRedundancyOptimizer(
              model.parameters(),
              Adam,
              { lr: 1e-4 },
              { stage: mode === 'zero1' ? 1 : 2, processGroup: group },
            );
    }
    for (let s = 0; s < steps; s++) stepTimes.push(await step());
    stateBytes = optimizerStateBytes(optimizer instanceof ZeroRedundancyOptimizer ? optimizer.optim : optimizer);
    return [];
  });
  const later = stepTimes.slice(1);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const sample: RankSample = {
    rank: group.rank,
    params,
    peakBytes: profile.peakBytes,
    stateBytes,
    seconds: (performance.now() - t0) / 1000,
    stepSeconds: mean(later),
    stepCpuSeconds: mean(stepCpu.slice(1, steps)),
  };
  if (fsdp && mode !== 'fsdp-no-prefetch') {
    Object.assign(sample, await checkpointStall(fsdp, optimizer!, step, group.rank, mode === 'fsdp-free-core'));
  }
  printSample(sample);
  await destroyProcessGroup();
}

/**
 * Kernel threads per rank: 1 with a core left free, else --threads, else the host's cores shared among the ranks
 * (as ddp-run), unless the environment chose.
 */
function threadsPerRank(world: number, mode: Mode): number | undefined {
  if (mode === 'fsdp-free-core') return 1;
  if (values.threads !== undefined) return values.threads;
  if (process.env.DDP_NUM_THREADS ?? process.env.OMP_NUM_THREADS) return undefined;
  return Math.max(1, Math.floor(availableParallelism() / world));
}

/** Starts `world` rank processes of this file; resolves with every rank's sample. */
async function runWorld(world: number, mode: Mode, steps: number): Promise<RankSample[]> {
  const args = [
    '--conditions=@ddp/source',
    '--import',
    'tsx',
    fileURLToPath(import.meta.url),
    '--rank',
    '--mode',
    mode,
    '--steps',
    `${steps}`,
  ];
  const threads = threadsPerRank(world, mode);
  const env: Record<string, string> = threads === undefined ? {} : { DDP_NUM_THREADS: `${threads}` };
  const ranks = await runSampleWorld<RankSample>(world, process.execPath, args, { env });
  return ranks.map((samples, rank) => {
    if (!samples[0]) throw new Error(`${mode} rank ${rank}/${world} printed no sample`);
    return samples[0];
  });
}

const round2 = (x: number) => Math.round(x * 100) / 100;
/** The slowest rank's figure, rounded; '' where the mode does not measure it. */
type SaveKey =
  | 'syncSaveSeconds'
  | 'asyncStallSeconds'
  | 'asyncSaveCallSeconds'
  | 'asyncSaveSeconds'
  | 'asyncMainCpuSeconds'
  | 'asyncOtherCpuSeconds';
const maxOf = (ranks: RankSample[], key: SaveKey) => Math.max(...ranks.map((r) => r[key]!));
/** Over the rounds: the fastest round's figure (each the slowest rank's); '' where the mode does not measure it. */
const bestOf = (rounds: RankSample[][], key: SaveKey) =>
  rounds[0][0][key] === undefined ? '' : round2(Math.min(...rounds.map((ranks) => maxOf(ranks, key))));
/** A round's step time (s): the slowest rank's mean step. */
const stepOf = (ranks: RankSample[]) => Math.max(...ranks.map((r) => r.stepSeconds));

async function main(): Promise<void> {
  const { steps, worlds, rounds } = values;
  const rows = [];
  // the machine's speed drifts from one run to the next: every mode runs once per round, and each ratio to
  // DDP is taken within its round (the median of the rounds' ratios is the figure)
  const samples: Record<string, RankSample[][]> = {};
  for (let round = 0; round < rounds; round++)
    for (const world of worlds)
      for (const mode of values.modes) {
        console.log(`round ${round + 1}/${rounds}: ${mode} on ${world} ranks …`);
        const key = `${mode}@${world}`;
        samples[key] = [...(samples[key] ?? []), await runWorld(world, mode, steps)];
      }
  for (const world of worlds) {
    for (const mode of values.modes) {
      const byRound = samples[`${mode}@${world}`];
      const ddp = samples[`ddp@${world}`];
      const all = byRound.flat();
      const peak = Math.max(...all.map((r) => r.peakBytes));
      const state = Math.max(...all.map((r) => r.stateBytes));
      rows.push({
        ranks: world,
        threadsPerRank: threadsPerRank(world, mode) ?? 'env',
        mode,
        params: all[0].params,
        peakMBPerRank: Math.round((peak / MB) * 10) / 10,
        optimizerStateMBPerRank: Math.round((state / MB) * 10) / 10,
        seconds: Math.round(median(byRound.map((ranks) => Math.max(...ranks.map((r) => r.seconds)))) * 10) / 10,
        stepSeconds: round2(median(byRound.map(stepOf))),
        stepVsDdp: ddp ? round2(median(byRound.map((ranks, i) => stepOf(ranks) / stepOf(ddp[i])))) : '',
        stepCpuSeconds: round2(median(byRound.map((ranks) => Math.max(...ranks.map((r) => r.stepCpuSeconds))))),
        syncSaveSeconds: bestOf(byRound, 'syncSaveSeconds'),
        asyncStallSeconds: bestOf(byRound, 'asyncStallSeconds'),
        asyncSaveCallSeconds: bestOf(byRound, 'asyncSaveCallSeconds'),
        asyncMainCpuSeconds: bestOf(byRound, 'asyncMainCpuSeconds'),
        asyncOtherCpuSeconds: bestOf(byRound, 'asyncOtherCpuSeconds'),
        asyncSaveSeconds: bestOf(byRound, 'asyncSaveSeconds'),
      });
      console.log(JSON.stringify(rows.at(-1)));
    }
  }
  const { writeReport } = await import('@ddp/plot');
  const outDir = fileURLToPath(new URL('../results', import.meta.url));
  const meta = {
    model: `${LAYERS} × Linear(${WIDTH}, ${WIDTH})`,
    optimizer: 'Adam',
    batch: BATCH,
    steps,
    backend: tf.getBackend(),
    samples,
  };
  const files = await writeReport(outDir, 'zero', rows, {
    meta,
    notes:
      `Peak tensor memory per rank (max over ranks, tf.profile peakBytes over ${steps} training steps, Adam) of a ` +
      `${LAYERS} × Linear(${WIDTH}, ${WIDTH}) MLP. ddp: DistributedDataParallel + Adam on every rank; zero1: DDP + ` +
      'ZeroRedundancyOptimizer stage 1; zero2: ZeroRedundancyOptimizer stage 2 on the bare model ' +
      '(gradients reduced to their owner in backward); fsdp: @ddp/fsdp fullyShard per Linear and on the root, ' +
      'Adam over the shards (fsdp-no-prefetch: all-gathers issued only when needed; fsdp-free-core: the save ' +
      "figures with each rank's main thread on CPU 0 and its other threads, the checkpoint writer's too, on CPU 1, " +
      `one kernel thread per rank). ${rounds} round(s), each running every mode once. stepSeconds: mean of the ` +
      "steps after the first (the slowest rank; median of the rounds); stepVsDdp: over DDP's of the same round " +
      '(median of the rounds); stepCpuSeconds: their mean CPU time per rank, every thread (steadier on ' +
      "a shared machine); save figures: the fastest round's; " +
      `syncSaveSeconds: saveFSDPCheckpoint (fastest of ${SAVE_REPEATS}); asyncStallSeconds: ` +
      `AsyncCheckpointer.save, the ${OVERLAPPED_STEPS} steps after it and any wait left for its commit ` +
      `(fastest of ${SAVE_REPEATS}), minus as ` +
      'many plain steps (the fastest of two before and one after); asyncSaveCallSeconds: its save call alone (the ' +
      'host copy); asyncSaveSeconds: its time until committed; asyncMainCpuSeconds / asyncOtherCpuSeconds: the CPU ' +
      'that window took beyond as many plain steps (their mean), on the main thread and on all other threads (the ' +
      "writer's checksums and page-cache writes, the checkpoint group's collectives). Communication buffers are JS " +
      'memory and not counted.',
    chart: CHARTS.zero.chart(meta, rows),
  });
  console.log(files.join('\n'));
}

if (values.rank) await rankMain(values.mode, values.steps);
else await main();
