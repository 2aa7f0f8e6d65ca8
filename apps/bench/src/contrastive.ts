/**
 * `pnpm bench contrastive`: per-rank time and peak tensor memory of clipLoss's
 * [local × global] logits against the usual [global × global] on every rank, forward and
 * backward of the loss only, global batch 1024 × 64, at 2 and 4 ranks. Writes results/contrastive.*.
 */
import { fileURLToPath } from 'node:url';
import { randn, tensor } from '@ddp/autograd';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { clipLoss, clipLossFullMatrix } from '@ddp/contrastive';
import { tf } from '@ddp/tensor';
import { CHARTS } from './lib/charts.js';
import { benchCommand, rankFlag } from './lib/flags.js';
import { median } from './lib/step-stats.js';
import { printSample, runSampleWorld } from './lib/world.js';

const GLOBAL = 1024;
const DIM = 64;
const REPEATS = 6; // the first is a warm-up and is not counted
const LOSSES = { 'local×global': clipLoss, 'global×global': clipLossFullMatrix } as const;

interface LossSample {
  rank: number;
  world: number;
  loss: keyof typeof LOSSES;
  medianMs: number;
  peakMB: number;
}

async function rank(): Promise<void> {
  const group = await initProcessGroup();
  const local = GLOBAL / group.size;
  for (const [loss, fn] of Object.entries(LOSSES) as [keyof typeof LOSSES, typeof clipLoss][]) {
    const times: number[] = [];
    let peak = 0;
    for (let i = 0; i < REPEATS; i++) {
      const img = randn([local, DIM], { requiresGrad: true, seed: 1 + group.rank });
      const txt = randn([local, DIM], { requiresGrad: true, seed: 100 + group.rank });
      const scale = tensor([Math.log(14)], [], { requiresGrad: true });
      await group.barrier().wait();
      const t0 = performance.now();
      const info = await tf.profile(async () => {
        const l = await fn(img, txt, scale, { group });
        await l.backward();
        l.dispose();
        return tf.scalar(0);
      });
      if (i > 0) times.push(performance.now() - t0);
      peak = Math.max(peak, info.peakBytes);
      for (const t of [img, txt, scale]) t.dispose();
    }
    times.sort((a, b) => a - b);
    const sample: LossSample = {
      rank: group.rank,
      world: group.size,
      loss,
      medianMs: median(times),
      peakMB: peak / 2 ** 20,
    };
    printSample(sample);
  }
  await destroyProcessGroup();
}

async function main(): Promise<void> {
  const args = ['--conditions=@ddp/source', '--import', 'tsx', fileURLToPath(import.meta.url), '--rank'];
  const rows = [];
  for (const world of [2, 4]) {
    const samples = (await runSampleWorld<LossSample>(world, process.execPath, args)).flat();
    for (const loss of Object.keys(LOSSES) as (keyof typeof LOSSES)[]) {
      const mine = samples.filter((s) => s.loss === loss);
      rows.push({
        loss,
        world,
        peakMB: Math.max(...mine.map((s) => s.peakMB)),
        medianMs: Math.max(...mine.map((s) => s.medianMs)),
      });
    }
  }
  const { writeReport } = await import('@ddp/plot');
  const files = await writeReport(fileURLToPath(new URL('../results', import.meta.url)), 'contrastive', rows, {
    meta: { global: GLOBAL, dim: DIM, repeats: REPEATS },
    chart: CHARTS.contrastive.chart({ global: GLOBAL }, rows),
    notes:
      `Forward + backward of the loss only, ${GLOBAL} × ${DIM} features; the slowest rank's median of ` +
      `${REPEATS - 1} runs and the largest peak.`,
  });
  console.log(`wrote ${files.join(', ')}`);
}

const flags = benchCommand('contrastive', "clipLoss's time and memory against the full-matrix loss")
  .addOption(rankFlag())
  .parse()
  .opts<{ rank?: boolean }>();
await (flags.rank ? rank() : main());
