import { latestCheckpoint } from '@ddp/nn';

/**
 * A resumed run must see the batches the interrupted one would have seen next and go on with its
 * learning-rate schedule. The seed, the global batch and the accumulation fix that stream
 * (batches.ts); resumed under other values, the run would silently train on other samples (some
 * twice, some never in the epoch). The peak lr and the step count fix the schedule: the checkpoint
 * restores the saved one, so other values would be ignored, silently; --amp changes the numerics
 * and, off, drops the saved GradScaler state. The world size may change: batches are global.
 */

/** The options a resumed run must keep, saved in the checkpoint's `extra.stream`. */
export interface ResumedOptions {
  seed: number;
  batchSize: number;
  gradAccum: number;
  lr: number;
  steps: number;
  /** The autocast dtype, or 'none'. */
  amp: 'bfloat16' | 'float16' | 'none';
}

const FLAGS: Record<keyof ResumedOptions, string> = {
  seed: '--seed',
  batchSize: '--batch-size',
  gradAccum: '--grad-accum',
  lr: '--lr',
  steps: '--steps',
  amp: '--amp',
};
const AMP_FLAGS = { bfloat16: '--amp bf16', float16: '--amp fp16', none: 'no --amp' } as const;
const flag = (k: keyof ResumedOptions, v: unknown) =>
  k === 'amp' ? AMP_FLAGS[v as ResumedOptions['amp']] : `${FLAGS[k]} ${v}`;

/** A checkpoint resumed under options that would change the run it continues. */
export class ResumeError extends Error {
  override name = 'ResumeError';
}

/**
 * The options a checkpoint's `extra` records: `stream` (without lr and steps in checkpoints written
 * before they were saved), or only `seed` in checkpoints written before `stream` was.
 */
export function savedOptions(extra: unknown): Partial<ResumedOptions> {
  const e = (extra ?? {}) as { stream?: ResumedOptions; seed?: number };
  return e.stream ?? (e.seed === undefined ? {} : { seed: e.seed });
}

/** Throws ResumeError naming every option whose value differs from the one the checkpoint was written with. */
export function checkSameOptions(
  saved: Partial<ResumedOptions>,
  current: ResumedOptions,
  path: string,
  rank: number,
): void {
  const differ = (Object.keys(FLAGS) as (keyof ResumedOptions)[]).filter(
    (k) => saved[k] !== undefined && saved[k] !== current[k],
  );
  if (differ.length === 0) return;
  const was = differ.map((k) => flag(k, saved[k])).join(' ');
  const now = differ.map((k) => flag(k, current[k])).join(' ');
  throw new ResumeError(
    `rank ${rank}: ${path} was written by a run with ${was}, this one has ${now}: its batches or its ` +
      `learning-rate schedule would differ from the run it continues. Resume with ${was}, or start a new ` +
      '--checkpoint-dir.',
  );
}

/**
 * A run without --resume or --overwrite refuses a --checkpoint-dir that holds a checkpoint (or a
 * damaged one): its first save would remove it, and with it another run's training, silently.
 */
export async function refuseToReplace(dir: string, rank: number): Promise<void> {
  const held = await latestCheckpoint(dir).catch((e: Error) => e.message);
  if (held === null) return;
  throw new ResumeError(
    `rank ${rank}: ${dir} holds a checkpoint (${held}) that this run's first save would remove: pass --resume ` +
      'to continue it, --overwrite to start afresh and replace it, or another --checkpoint-dir',
  );
}
