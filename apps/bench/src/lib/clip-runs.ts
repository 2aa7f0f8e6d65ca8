import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from '@ddp/launch';
import { runSampleWorld } from './world.js';

const CLIP_DIR = fileURLToPath(new URL('../../../clip/', import.meta.url));
/** What `pnpm clip` runs: the app and the packages built to JavaScript (buildApp), no TypeScript loader. */
const APP = join(CLIP_DIR, 'dist/train.js');
const TWIN = fileURLToPath(new URL('../clip_twin.py', import.meta.url));
const RUN_TIMEOUT_MS = 1_800_000;
/**
 * What apps/clip's `train` script gives its ranks (pnpm clip): V8's 16 MiB default young
 * generation beside a ~35 MiB old one made every 4th step or so a full mark-compact.
 */
const RANK_NODE_OPTIONS = `--max-semi-space-size=4 ${process.env.NODE_OPTIONS ?? ''}`.trim();

/** The part of apps/clip's run.json (`--dump-init`) the bench reads; apps/clip/src/dump.ts has the whole. */
export interface DumpedRun {
  world: number;
  steps: number;
  batchSize: number;
  evalEvery: number;
  checkpointEvery: number;
  schedule: { warmupSteps: number };
}

/** One training run of either implementation, read back from its metrics. */
export interface ClipRun {
  impl: 'ddp' | 'torch';
  round: number;
  /** Process start to exit. */
  wallS: number;
  /** Rank 0's time per step: batch, forward, loss, backward with the all-reduce, optimizer. */
  stepMs: number[];
  /** Rank 0's loss per step. */
  losses: number[];
  evals: { step: number; top1: number }[];
}

/** Builds apps/clip and the packages it imports (turbo: only what changed), as `pnpm clip` does first. */
export function buildApp(): void {
  execFileSync('pnpm', ['exec', 'turbo', 'run', 'build', '--filter=@ddp/clip', '--output-logs=errors-only'], {
    cwd: CLIP_DIR,
    stdio: 'inherit',
  });
}

/**
 * apps/clip (built: buildApp) on `world` ranks through @ddp/launch (what `ddp-run --nproc-per-node` does), with
 * `appArgs` (the bench's, for every run) and `args`; resolves with its wall time in seconds.
 */
export async function runApp(world: number, appArgs: string[], args: string[]): Promise<number> {
  const t0 = performance.now();
  const result = await launch(
    {
      script: APP,
      args: [...appArgs, ...args],
      nprocPerNode: world,
      sourceConditions: false,
      env: { ...process.env, NODE_OPTIONS: RANK_NODE_OPTIONS },
      signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
    },
    { forwardSignals: false },
  );
  if (result.exitCode !== 0) {
    throw new Error(`apps/clip ${args.join(' ')} failed (exit ${result.exitCode}): ${result.summary}`);
  }
  return (performance.now() - t0) / 1000;
}

type MetricRow = { step: number; loss?: number; samplesPerSec?: number; zeroShotTop1?: number };

/** apps/clip's run of the dumped settings, its outputs under `dir`. */
export async function ddpRun(
  run: DumpedRun,
  appArgs: string[],
  dir: string,
  round: number,
  extra: string[] = [],
): Promise<ClipRun> {
  const wallS = await runApp(run.world, appArgs, ['--out', dir, '--checkpoint-dir', join(dir, 'ckpt'), ...extra]);
  const rows = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricRow);
  const steps = rows.filter((r) => r.loss !== undefined);
  return {
    impl: 'ddp',
    round,
    wallS,
    // the app logs rank 0's samples/s per step, rounded to an integer (< 0.1 % at these rates)
    stepMs: steps.map((r) => (1000 * run.batchSize) / r.samplesPerSec!),
    losses: steps.map((r) => r.loss!),
    evals: rows.filter((r) => r.zeroShotTop1 !== undefined).map((r) => ({ step: r.step, top1: r.zeroShotTop1! })),
  };
}

type StepSample = { step: number; loss: number; ms: number };
type EvalSample = { step: number; zeroShotTop1: number };

/**
 * The PyTorch twin (clip_twin.py under /usr/bin/python3, one process per rank, one thread each)
 * on the dump in `dump`, checkpoints under `dir`; `maxSteps` stops it early.
 */
export async function torchRun(
  run: DumpedRun,
  dump: string,
  dir: string,
  round: number,
  maxSteps?: number,
): Promise<ClipRun> {
  const args = [TWIN, dump, dir, ...(maxSteps === undefined ? [] : [String(maxSteps)])];
  const t0 = performance.now();
  const world = { env: { OMP_NUM_THREADS: '1' }, timeoutMs: RUN_TIMEOUT_MS };
  const [samples = []] = await runSampleWorld<StepSample | EvalSample>(run.world, '/usr/bin/python3', args, world);
  const wallS = (performance.now() - t0) / 1000;
  const steps = samples.filter((s): s is StepSample => 'ms' in s);
  const evals = samples.filter((s): s is EvalSample => 'zeroShotTop1' in s);
  return {
    impl: 'torch',
    round,
    wallS,
    stepMs: steps.map((s) => s.ms),
    losses: steps.map((s) => s.loss),
    evals: evals.map((s) => ({ step: s.step, top1: s.zeroShotTop1 })),
  };
}
