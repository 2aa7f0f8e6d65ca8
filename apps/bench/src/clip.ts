/**
 * `pnpm bench clip`: the CLIP app (apps/clip: 150 steps, global batch 256, on 2 ranks through
 * ddp-run) against its PyTorch twin (src/clip_twin.py: torch DDP over Gloo, 2 ranks, one
 * thread each) training the same run: apps/clip's `--dump-init` writes the initial weights,
 * every batch, the evaluated test pairs and the settings once, and the twin loads them. Runs
 * alternate (ddp, torch, ddp, torch, …) for `--rounds`; each reports the wall time of the whole
 * run, the training time to the last step (the steps alone, without start-up, evaluations and
 * checkpoints), samples/s over it and the zero-shot top-1. Writes results/clip.{json,md,png}.
 *
 *   pnpm bench clip [--rounds 2] [--steps 150] [--check]
 *
 * --check: the equivalence check instead: both train the first CHECK_STEPS steps of the same
 * run and the batch's losses (the ranks' mean, as each logs it) must agree to CHECK_TOLERANCE at
 * every step: the first (same weights, same batch) checks the model and loss, the later ones the optimizer and schedule
 * too (`--steps 10` makes the warm-up one step, so they run at the full learning rate).
 * Writes results/clip-check.{json,md}; exits 1 when they do not agree.
 *
 * --step: one process, one thread each, no DDP: apps/clip's forward + loss + backward of a
 * batch of 128 pairs (src/step-timer.ts) against the twin's (src/clip_step.py), alternating for
 * `--rounds`; median wall and CPU ms per step. Writes results/clip-step.{json,md}.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Row, renderLineChart, writeReport } from '@ddp/plot';
import { CHARTS } from './lib/charts.js';
import { buildApp, type ClipRun, type DumpedRun, ddpRun, runApp, torchRun } from './lib/clip-runs.js';
import { type StepTiming, timeSteps } from './lib/clip-step.js';
import { benchCommand, positiveInt } from './lib/flags.js';
import { glooTorchVersion } from './lib/world.js';

const CHECK_STEPS = 5;
const CHECK_TOLERANCE = 1e-5;
/** Pairs per step of --step: one rank's share of the app's global batch of 256. */
const STEP_BATCH = 128;
/** Steps between --step's early and steady medians: V8 compiles ddp's step over its first ~100 steps. */
const STEP_WARMUP = 100;
/** Ranks of each implementation: what `pnpm clip` runs. */
const WORLD = 2;
const RESULTS = fileURLToPath(new URL('../results', import.meta.url));

const opts = benchCommand('clip', '@ddp against PyTorch DDP on the CLIP app')
  .option('--rounds <n>', 'rounds of each implementation', positiveInt, 2)
  .option('--steps <n>', 'training steps (passed to every app run); with --step, timed steps', positiveInt)
  .option('--check', `compare the first ${CHECK_STEPS} losses instead`, false)
  .option('--step', 'time one-process forward + loss + backward steps instead', false)
  .parse(process.argv.filter((a) => a !== '--'))
  .opts<{ rounds: number; steps?: number; check: boolean; step: boolean }>();
const rounds = opts.rounds;
/** Passed to every app run (the dump too): the twin follows whatever the app derives from them. */
const appArgs = opts.steps === undefined ? [] : ['--steps', String(opts.steps)];

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const mean = (xs: number[]) => sum(xs) / xs.length;
const exp2 = (x: number) => x.toExponential(2);
/** Markdown paragraphs, each given as its lines. */
const paragraphs = (...ps: string[][]) => ps.map((lines) => lines.join(' ')).join('\n\n');

/** --check: the first CHECK_STEPS losses of both, side by side. */
async function check(run: DumpedRun, dump: string, work: string, torch: string): Promise<void> {
  const ddp = await ddpRun(run, appArgs, join(work, 'ddp'), 0, ['--exit-after', String(CHECK_STEPS)]);
  const twin = await torchRun(run, dump, join(work, 'torch'), 0, CHECK_STEPS);
  const rows = ddp.losses.map((loss, i) => {
    const torchLoss = twin.losses[i] ?? Number.NaN;
    return { step: i + 1, ddpLoss: loss, torchLoss, absDiff: Math.abs(loss - torchLoss) };
  });
  const first = rows[0]?.absDiff ?? Number.NaN;
  const worst = Math.max(...rows.map((r) => r.absDiff));
  const ok = rows.length === CHECK_STEPS && worst <= CHECK_TOLERANCE;
  const notes = paragraphs(
    [
      `Equivalence of the PyTorch ${torch} twin and apps/clip: the same initial weights and batches (apps/clip`,
      `--dump-init), ${run.world} ranks each, the batch's loss (the ranks' mean) of the first ${CHECK_STEPS} ` +
        `of ${run.steps} steps`,
      `(warm-up over ${run.schedule.warmupSteps}; the learning rate is 0 at step 1).`,
    ],
    [
      `|ddp − torch| at step 1 (same weights, same batch): ${exp2(first)}; largest over the ${CHECK_STEPS} steps`,
      `(the optimizer and schedule too): ${exp2(worst)}; bound ${CHECK_TOLERANCE}: ${ok ? 'PASS' : 'FAIL'}.`,
    ],
  );
  const meta = { torch, run, tolerance: CHECK_TOLERANCE };
  const files = await writeReport(RESULTS, 'clip-check', rows, { meta, notes });
  for (const r of rows) {
    console.log(`step ${r.step}: ddp ${r.ddpLoss.toFixed(7)} torch ${r.torchLoss.toFixed(7)} |Δ| ${exp2(r.absDiff)}`);
  }
  console.log(`${notes}\nwrote ${files.join(', ')}`);
  if (!ok) process.exitCode = 1;
}

/** A run's curves against step: training time to the step, samples/s and loss per `every` steps, zero-shot top-1. */
function curves(r: ClipRun, batchSize: number, label: string, every = 10): Row[] {
  const points: Row[] = [];
  const add = (step: number, metric: string, value: number) => {
    points.push({ step, metric, value: Number(value.toPrecision(5)), run: label });
  };
  for (let end = every; end <= r.stepMs.length; end += every) {
    add(end, 'training time to step (s)', sum(r.stepMs.slice(0, end)) / 1000);
    const blockS = sum(r.stepMs.slice(end - every, end)) / 1000;
    add(end, `samples/s (mean over ${every} steps)`, (every * batchSize) / blockS);
    add(end, `train loss (mean over ${every} steps)`, mean(r.losses.slice(end - every, end)));
  }
  for (const e of r.evals) add(e.step, 'zero-shot top-1 (%)', 100 * e.top1);
  return points;
}

const finalTop1 = (r: ClipRun) => 100 * (r.evals.at(-1)?.top1 ?? Number.NaN);

async function bench(run: DumpedRun, dump: string, work: string, torch: string): Promise<void> {
  const runs: ClipRun[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const impl of ['ddp', 'torch'] as const) {
      const dir = join(work, `${impl}-${round}`);
      const r = impl === 'ddp' ? await ddpRun(run, appArgs, dir, round) : await torchRun(run, dump, dir, round);
      runs.push(r);
      const trainS = sum(r.stepMs) / 1000;
      const top1 = finalTop1(r).toFixed(1);
      const wall = r.wallS.toFixed(1);
      console.log(`round ${round}/${rounds} ${impl}: ${wall} s wall, ${trainS.toFixed(1)} s training, top-1 ${top1} %`);
    }
  }
  const rows = runs.map((r) => ({
    impl: r.impl,
    round: r.round,
    steps: r.stepMs.length,
    wallS: Number(r.wallS.toFixed(1)),
    trainS: Number((sum(r.stepMs) / 1000).toFixed(2)),
    samplesPerSec: Math.round((r.stepMs.length * run.batchSize) / (sum(r.stepMs) / 1000)),
    zeroShotTop1Pct: Number(finalTop1(r).toFixed(1)),
    lossLast10: Number(mean(r.losses.slice(-10)).toFixed(4)),
  }));
  const of = (impl: string) => rows.filter((r) => r.impl === impl);
  const best = (impl: string, key: 'wallS' | 'trainS') => Math.min(...of(impl).map((r) => r[key]));
  const ratio = (key: 'wallS' | 'trainS') => (best('ddp', key) / best('torch', key)).toFixed(2);
  // each round's ddp run beside the torch run right after it: steadier than best-of when the host's load drifts
  const paired = (key: 'wallS' | 'trainS') => {
    const ratios = of('ddp')
      .map((r, i) => r[key] / of('torch')[i][key])
      .sort((a, b) => a - b);
    const mid = ratios.length >> 1;
    return (ratios.length % 2 ? ratios[mid] : (ratios[mid - 1] + ratios[mid]) / 2).toFixed(2);
  };
  const top1 = (impl: string) => [...new Set(of(impl).map((r) => `${r.zeroShotTop1Pct} %`))].join(', ');
  const notes = paragraphs(
    [
      `apps/clip built to JavaScript as \`pnpm clip\` runs it (@ddp/reducer DDP on tfjs-wasm, with`,
      "@ddp/native-kernels where built — the ranks' start-up line says —,",
      `one thread per rank) against a PyTorch ${torch} twin (DDP over`,
      `Gloo, torch.set_num_threads(1)), ${run.world} ranks each, ${run.steps} steps × global batch ${run.batchSize},`,
      'the same initial weights, batches, loss, AdamW groups, schedule and evaluation (apps/clip --dump-init;',
      '`pnpm bench clip --check` compares the losses).',
    ],
    [
      `${rounds} alternating round(s) on this host (2 shared cores: ranks compete with each other and with other`,
      'work; read ratios). wallS: the whole run, process start to exit (start-up, MNIST, evaluations every',
      `${run.evalEvery} steps, checkpoints every ${run.checkpointEvery}; the app also draws its curves).`,
      "trainS: rank 0's steps alone (batch, forward, loss, backward with the all-reduce, optimizer).",
    ],
    [
      `Best of the rounds: training ${best('ddp', 'trainS')} s (ddp) vs ${best('torch', 'trainS')} s (torch),`,
      `ddp / torch ${ratio('trainS')}; wall ${best('ddp', 'wallS')} s vs ${best('torch', 'wallS')} s,`,
      `ddp / torch ${ratio('wallS')}. Median over the rounds of each round's ratio: training ${paired('trainS')},`,
      `wall ${paired('wallS')}.`,
      `Zero-shot top-1 after ${run.steps} steps: ddp ${top1('ddp')}, torch ${top1('torch')}.`,
    ],
  );
  const curveRows = runs.flatMap((r) => curves(r, run.batchSize, rounds > 1 ? `${r.impl} #${r.round}` : r.impl));
  const meta = { torch, run, rounds, runs, curves: curveRows };
  const files = await writeReport(RESULTS, 'clip', rows, { meta, notes });
  const png = join(RESULTS, 'clip.png');
  await writeFile(png, await renderLineChart(curveRows, CHARTS.clip.chart(meta, curveRows)));
  console.log(`${notes}\nwrote ${[...files, png].join(', ')}`);
}

/** --step: one-process training steps without DDP or optimizer, ddp and torch alternating. */
async function stepBench(torch: string): Promise<void> {
  const [batch, steps, warmup] = [STEP_BATCH, opts.steps ?? 30, STEP_WARMUP];
  const rows: StepTiming[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const impl of ['ddp', 'torch'] as const) {
      const r = await timeSteps(impl, round, batch, steps, warmup);
      rows.push(r);
      console.log(
        `round ${round}/${rounds} ${impl}: ${r.wallMs.toFixed(1)} ms wall, ${r.cpuMs.toFixed(1)} ms CPU per step` +
          ` (early: ${r.earlyWallMs.toFixed(1)} / ${r.earlyCpuMs.toFixed(1)})`,
      );
    }
  }
  type Key = 'wallMs' | 'cpuMs' | 'earlyWallMs' | 'earlyCpuMs';
  const best = (impl: string, key: Key) => Math.min(...rows.filter((r) => r.impl === impl).map((r) => r[key]));
  const ratio = (key: Key) => (best('ddp', key) / best('torch', key)).toFixed(2);
  const notes = paragraphs(
    [
      `CLIP forward + loss + backward of ${batch} pairs in one process with one thread, no DDP and no optimizer:`,
      `apps/clip's model and clipLoss (apps/clip/src/step-timer.ts) against the PyTorch ${torch} twin's`,
      `(src/clip_step.py), ${rounds} alternating round(s) on this host (2 shared cores: read ratios; CPU time`,
      `is the less disturbed by other work). Steady: the median of ${steps} steps after ${5 + steps + warmup}`,
      `untimed or early ones; early: the median of the ${steps} steps after the first 5, while V8 still compiles`,
      "ddp's JavaScript on helper threads (the first ~100 steps of a training run pay it).",
    ],
    [
      `Best of the rounds: ${best('ddp', 'wallMs').toFixed(1)} ms (ddp) vs ${best('torch', 'wallMs').toFixed(1)} ms`,
      `(torch) wall, ddp / torch ${ratio('wallMs')}; CPU ${best('ddp', 'cpuMs').toFixed(1)} ms vs`,
      `${best('torch', 'cpuMs').toFixed(1)} ms, ddp / torch ${ratio('cpuMs')}. Early: ` +
        `${best('ddp', 'earlyWallMs').toFixed(1)}`,
      `vs ${best('torch', 'earlyWallMs').toFixed(1)} ms wall (${ratio('earlyWallMs')}), CPU ${ratio('earlyCpuMs')}.`,
    ],
  );
  const round2 = (x: number) => Number(x.toFixed(2));
  const table = rows.map((r) => ({
    ...r,
    wallMs: round2(r.wallMs),
    cpuMs: round2(r.cpuMs),
    earlyWallMs: round2(r.earlyWallMs),
    earlyCpuMs: round2(r.earlyCpuMs),
  }));
  const meta = { torch, batch, steps, warmup, rounds };
  const files = await writeReport(RESULTS, 'clip-step', table, { meta, notes });
  console.log(`${notes}\nwrote ${files.join(', ')}`);
}

async function main(): Promise<void> {
  const torch = glooTorchVersion();
  if (!torch) throw new Error('pnpm bench clip needs PyTorch with Gloo under /usr/bin/python3 (Debian: python3-torch)');
  if (opts.step) return stepBench(torch);
  const work = mkdtempSync(join(tmpdir(), 'bench-clip-'));
  try {
    const dump = join(work, 'dump');
    buildApp();
    await runApp(WORLD, appArgs, ['--dump-init', dump]);
    const run = JSON.parse(readFileSync(join(dump, 'run.json'), 'utf8')) as DumpedRun;
    await (opts.check ? check(run, dump, work, torch) : bench(run, dump, work, torch));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
