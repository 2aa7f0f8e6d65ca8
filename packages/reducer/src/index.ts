export { DistributedDataParallel } from './ddp.js';
export type { DDPOptions } from './options.js';
export type { BucketCapTuning } from './autotune.js';
export { DataParallelNaive } from './naive.js';
export { Bucket, type BucketSlot, assignBuckets } from './bucket.js';
export { allreduceHook, fp16CompressHook, bf16CompressHook, type CommHook, type GradBucket } from './comm-hooks.js';
export { DDPJoinHook } from './join-hook.js';
export { DDPError, DDPCommError, DDPUsageError, NonFiniteGradientError, ParameterMismatchError, UnusedParametersError } from './errors.js';
export { PowerSGDState, powerSGDHook, type PowerSGDOptions } from './powersgd.js';
