/**
 * `pnpm bench adasum`: Adasum in the setting Horovod and the Adasum paper make their claim in —
 * Horovod's Adasum optimizer (each rank's own optimizer step at the single-worker learning rate η,
 * the steps' deltas combined with Adasum) against averaging the gradients with the linear-scaling
 * rule (lr N·η) and without it (lr η), and one worker alone at η; plain SGD (Horovod's case study)
 * and Momentum-SGD (the paper's). 4 ranks, a small teacher-student regression, held-out loss per
 * step. Writes results/adasum.{json,md,png} (SGD) and results/adasum-momentum.* .
 */
import { fileURLToPath } from 'node:url';
import { ARMS, BATCH, EVAL, HIDDEN, IN, type LossSample, MOMENTUM, OPTIMIZERS, trainRank } from './lib/adasum-train.js';
import { CHARTS } from './lib/charts.js';
import { benchCommand, positiveInt, positiveNumber, rankFlag } from './lib/flags.js';
import { runSampleWorld } from './lib/world.js';

/** A run "trains" when its final held-out loss is below this share of the initial loss (diverged runs stop early). */
const TRAINS_BELOW = 0.25;
/** Steps to a held-out loss of this share of the initial loss. */
const TARGET = 0.1;

/** One chart panel per arm, one line per η. */
const PANEL: Record<string, string> = {
  average: 'averaging at η',
  'average-scaled': 'averaging at N·η (linear scaling)',
  adasum: 'Adasum optimizer at η',
};

async function main(world: number, steps: number, lrs: number[], seeds: number): Promise<void> {
  const args = ['--conditions=@ddp/source', '--import', 'tsx', fileURLToPath(import.meta.url), '--rank'];
  args.push('--steps', `${steps}`, '--lrs', lrs.join(','), '--seeds', `${seeds}`);
  const samples = (await runSampleWorld<LossSample>(world, process.execPath, args)).flat();
  const { writeReport } = await import('@ddp/plot');
  const dir = fileURLToPath(new URL('../results', import.meta.url));
  for (const optimizer of OPTIMIZERS) {
    const mine = samples.filter((s) => s.optimizer === optimizer);
    const initial = mine.find((s) => s.step === 0)?.loss ?? Number.NaN;
    const runOf = (arm: string, lr: number, seed: number) =>
      mine.filter((s) => s.arm === arm && s.lr === lr && s.seed === seed);
    const seedList = [...Array(seeds).keys()];
    // the worst of the seeds: a learning rate "trains" when it does on every draw of the data
    const final = (arm: string, lr: number) =>
      Math.max(
        ...seedList.map((seed) => {
          const loss = runOf(arm, lr, seed).find((s) => s.step === steps)?.loss;
          return loss !== undefined && Number.isFinite(loss) ? loss : Number.POSITIVE_INFINITY;
        }),
      );
    const trains = (arm: string, lr: number) => final(arm, lr) < TRAINS_BELOW * initial;
    // Horovod's other claim: the same loss in fewer steps (the slowest seed; null when one never gets there)
    const stepsTo = (arm: string, lr: number) => {
      const reached = seedList.map((seed) => runOf(arm, lr, seed).find((s) => s.loss <= TARGET * initial)?.step);
      return trains(arm, lr) && reached.every((r) => r !== undefined) ? Math.max(...reached) : null;
    };
    const finals = ARMS.flatMap((arm) =>
      lrs.map((lr) => ({ arm, lr, finalLoss: final(arm, lr), stepsToTarget: stepsTo(arm, lr) })),
    );
    const largest = Object.fromEntries(ARMS.map((arm) => [arm, Math.max(0, ...lrs.filter((lr) => trains(arm, lr)))]));
    console.log(`${optimizer}: initial held-out loss ${initial.toPrecision(3)}`);
    console.table(finals);
    const verdict = (than: string) =>
      largest.adasum > largest[than] ? 'yes' : `no (${largest.adasum} vs ${largest[than]})`;
    const scaledLr = (arm: string, lr: number) => (arm === 'average-scaled' ? `${world}×${lr}` : `${lr}`);
    const notes = [
      `${world} ranks, ` +
        `${optimizer === 'sgd' ? 'plain SGD' : `SGD with momentum ${MOMENTUM} at lr η/10`}, ${BATCH} samples`,
      `per rank per step (each rank its own; ${seeds} draws, the worst counted, the plot shows the first), ` +
        `MLP ${IN}-${HIDDEN}-1 fitting a teacher MLP; loss on ${EVAL} held-out`,
      `samples (capped at 10 for the plot; a diverged run stops). single: one worker at η; average: DDP's mean at η;`,
      `average-scaled: the mean at ${world}·η (linear scaling); adasum: AdasumOptimizer (local step at η, deltas`,
      `combined). Initial loss ${initial.toPrecision(3)}; "trains" = final loss below ${TRAINS_BELOW} × initial.`,
      `Largest η that trains: ${ARMS.map((a) => `${a} ${largest[a] || 'none'}`).join(', ')}.`,
      `Adasum trains at a larger η than averaging with linear scaling: ${verdict('average-scaled')};`,
      `than averaging at η: ${verdict('average')}. Final losses (steps to ${TARGET} × initial): ${finals
        .map(
          (f) =>
            `${f.arm} η ${scaledLr(f.arm, f.lr)}: ` +
            `${Number.isFinite(f.finalLoss) ? f.finalLoss.toPrecision(3) : 'diverged'} (${f.stepsToTarget ?? '–'})`,
        )
        .join('; ')}.`,
    ].join(' ');
    const rows = mine
      .filter((s) => s.arm !== 'single' && s.seed === 0)
      .map((s) => ({
        arm: PANEL[s.arm],
        series: `η ${s.lr}`,
        step: s.step,
        loss: Number.isFinite(s.loss) ? Math.min(s.loss, 10) : 10,
      }));
    const name = optimizer === 'sgd' ? 'adasum' : `adasum-${optimizer}`;
    const files = await writeReport(dir, name, rows, {
      meta: { world, steps, seeds, optimizer, initial, finals, largestTrainingLr: largest },
      notes,
      chart: CHARTS.adasum.chart({ world, optimizer }, rows),
    });
    console.log(notes);
    console.log(`wrote ${files.join(', ')}`);
  }
}

const lrList = (v: string) => v.split(',').map((s) => positiveNumber(s));
const flags = benchCommand('adasum', "Adasum (Horovod's optimizer) vs averaging with and without linear lr scaling")
  .option('--world <n>', 'ranks (a power of two)', positiveInt, 4)
  .option('--steps <n>', 'steps per run', positiveInt, 60)
  .option('--seeds <n>', 'draws of the mini-batches per run', positiveInt, 3)
  .option('--lrs <list>', 'single-worker learning rates η, comma-separated', lrList, [0.1, 0.2, 0.4, 0.8, 1.6])
  .addOption(rankFlag())
  .parse()
  .opts<{ world: number; steps: number; lrs: number[]; seeds: number; rank?: boolean }>();
await (flags.rank
  ? trainRank(flags.steps, flags.lrs, flags.seeds)
  : main(flags.world, flags.steps, flags.lrs, flags.seeds));
