export { DistributedDataParallel } from './ddp.js';
export type { DDPOptions } from './options.js';
export type { BucketCapTuning } from './autotune.js';
export { DataParallelNaive } from './naive.js';
export { Bucket, type BucketSlot, assignBuckets } from './bucket.js';
export {
  allreduceHook,
  bf16CompressHook,
  type CommHook,
  fp16CompressHook,
  type GradBucket,
  type InPlaceBucket,
  type InPlaceCommHook,
  inPlaceHook,
} from './comm-hooks.js';
export { DDPJoinHook } from './join-hook.js';
export {
  DDPCommError,
  DDPError,
  DDPUsageError,
  GradientStorageMovedError,
  NonFiniteGradientError,
  ParameterMismatchError,
  UnusedParametersError,
} from './errors.js';
export { PowerSGDState, powerSGDHook, type PowerSGDOptions } from './powersgd.js';
export { AdasumError, AdasumState, adasumAllReduce, adasumHook, adasumPair, type Segment } from './adasum.js';
