export { AdasumError, AdasumState, adasumAllReduce, adasumHook, adasumPair, type Segment } from './adasum.js';
export { AdasumOptimizer, type LocalOptimizer } from './adasum-optimizer.js';
export type { BucketCapTuning } from './autotune.js';
export { Bucket, type BucketSlot } from './bucket.js';
export { assignBuckets } from './bucket-layout.js';
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
export { DistributedDataParallel } from './ddp.js';
export {
  DDPCommError,
  DDPError,
  DDPUsageError,
  GradientStorageMovedError,
  NonFiniteGradientError,
  ParameterMismatchError,
  UnusedParametersError,
} from './errors.js';
export { DDPJoinHook } from './join-hook.js';
export { DataParallelNaive } from './naive.js';
export type { DDPOptions } from './options.js';
export {
  type PowerSGDOptions,
  PowerSGDState,
  type PowerSGDStateDict,
  type SavedPowerSGDParameter,
} from './powersgd.js';
export { loadPowerSGDState, savePowerSGDState } from './powersgd-checkpoint.js';
export { powerSGDHook } from './powersgd-hook.js';
