import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const TIMER = fileURLToPath(new URL('../../../clip/src/step-timer.ts', import.meta.url));
const PEER = fileURLToPath(new URL('../clip_step.py', import.meta.url));
const TIMEOUT_MS = 600_000;
const run = promisify(execFile);

/**
 * Median milliseconds per step of one timer run (forward, loss, backward; one process, one thread):
 * steady state (after the warm-up) and early (the first steps, while V8 still compiles ddp's).
 */
export interface StepTiming {
  impl: 'ddp' | 'torch';
  round: number;
  wallMs: number;
  cpuMs: number;
  earlyWallMs: number;
  earlyCpuMs: number;
}

/**
 * One run of apps/clip's step timer (ddp) or its PyTorch counterpart (clip_step.py): `steps`
 * timed steps of `batch` pairs, `warmup` more, then `steps` again, in a fresh process pinned to one thread
 * (DDP_NUM_THREADS,
 * OMP_NUM_THREADS: what Debian's OpenBLAS under PyTorch follows).
 */
export async function timeSteps(
  impl: 'ddp' | 'torch',
  round: number,
  batch: number,
  steps: number,
  warmup: number,
): Promise<StepTiming> {
  const env = { ...process.env, DDP_NUM_THREADS: '1', OMP_NUM_THREADS: '1' };
  const [cmd, args] =
    impl === 'ddp'
      ? [
          process.execPath,
          [
            '--conditions=@ddp/source',
            '--import',
            'tsx',
            TIMER,
            '--batch',
            String(batch),
            '--steps',
            String(steps),
            '--warmup',
            String(warmup),
          ],
        ]
      : ['/usr/bin/python3', [PEER, String(batch), String(steps), String(warmup)]];
  const { stdout } = await run(cmd, args, { env, timeout: TIMEOUT_MS });
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  if (line === undefined) throw new Error(`${impl} step timer printed no result: ${stdout}`);
  const times = JSON.parse(line) as Omit<StepTiming, 'impl' | 'round'>;
  return { impl, round, ...times };
}
