import type { ProcessGroup } from '@ddp/comm';
import { checkBooleanOptions, checkOptionNames } from '@ddp/tensor';
import { DDPUsageError } from './errors.js';

export interface DDPOptions {
  /** Defaults to the world group; null (what newGroup gives a rank outside the group) is refused. */
  processGroup?: ProcessGroup | null;
  /** Size of every bucket but the first, in MiB. Unset: tuned in the first iterations among bucketCapCandidatesMB. */
  bucketCapMB?: number;
  /**
   * Caps (MiB) the autotune tries when bucketCapMB is unset (default 2, 8, 25, 64 and one bucket for all gradients);
   * a candidate that holds every gradient is one bucket, the first included.
   */
  bucketCapCandidatesMB?: readonly number[];
  /** Size of the first bucket, in MiB (default 1): small, so the first all-reduce starts early. */
  firstBucketMB?: number;
  /** Parameters that get no gradient are reduced as zeros instead of raising (default false). */
  findUnusedParameters?: boolean;
  /** Broadcast rank 0's buffers before every forward (default true); create copies them either way, as torch. */
  broadcastBuffers?: boolean;
  /**
   * Raise NonFiniteGradientError naming the parameter when an averaged gradient holds NaN/Inf (default true; one pass
   * over the averages).
   */
  checkFinite?: boolean;
}

/** Options DDP does not know, and sizes that are not positive numbers of MiB, raise DDPUsageError. */
const DDP_OPTIONS = [
  'processGroup',
  'bucketCapMB',
  'bucketCapCandidatesMB',
  'firstBucketMB',
  'findUnusedParameters',
  'broadcastBuffers',
  'checkFinite',
];

export function checkOptions(opts: DDPOptions): void {
  // torch's broadcast_buffers=False from a ported config was ignored: buffers broadcast anyway
  const error = (message: string) => new DDPUsageError(message);
  checkOptionNames('DistributedDataParallel.create', opts, DDP_OPTIONS, error);
  const booleans = ['findUnusedParameters', 'broadcastBuffers', 'checkFinite'];
  checkBooleanOptions('DistributedDataParallel.create', opts, booleans, error);
  for (const key of ['bucketCapMB', 'firstBucketMB'] as const) {
    const v = opts[key];
    if (v !== undefined && !(Number.isFinite(v) && v > 0))
      throw new DDPUsageError(`DistributedDataParallel.create: ${key} must be a positive number of MiB, got ${v}`);
  }
  const caps = opts.bucketCapCandidatesMB;
  if (caps !== undefined && (caps.length === 0 || !caps.every((v) => Number.isFinite(v) && v > 0))) {
    throw new DDPUsageError(
      `DistributedDataParallel.create: bucketCapCandidatesMB must be positive numbers of MiB, got [${caps.join(', ')}]`,
    );
  }
}
