export { copyToTp, gatherFromTp, reduceFromTp, splitToTp } from './regions.js';
export { ColumnParallelLinear, type LinearMaster, RowParallelLinear, VocabParallelEmbedding } from './layers.js';
export { TensorParallelAttention } from './attention.js';
export { TensorParallelBlock, TensorParallelMLP } from './block.js';
export { applyTensorParallel, type ApplyTensorParallelOptions } from './apply.js';
export { replicateParameter, shardParameter } from './shard.js';
export { TensorParallelError } from './errors.js';
