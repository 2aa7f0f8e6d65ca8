export { SyncBatchNorm, type SyncBatchNormOptions } from './sync-batch-norm.js';
export { SyncBatchNormFn, type SyncStatsOptions, combineStats } from './sync-batch-norm-fn.js';
export { convertSyncBatchnorm } from './convert.js';
export { SyncBatchNormError } from './errors.js';
