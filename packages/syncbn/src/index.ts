export { convertSyncBatchnorm } from './convert.js';
export { SyncBatchNormError } from './errors.js';
export { SyncBatchNorm, type SyncBatchNormOptions } from './sync-batch-norm.js';
export { combineStats, SyncBatchNormFn, type SyncStatsOptions } from './sync-batch-norm-fn.js';
