export { type ApplyTensorParallelOptions, applyTensorParallel } from './apply.js';
export { TensorParallelAttention } from './attention.js';
export { TensorParallelBlock, TensorParallelMLP } from './block.js';
export { TensorParallelError } from './errors.js';
export { ColumnParallelLinear, type LinearMaster, RowParallelLinear, VocabParallelEmbedding } from './layers.js';
export { copyToTp, gatherFromTp, reduceFromTp, splitToTp } from './regions.js';
export { replicateParameter, shardParameter } from './shard.js';
