export { ZeroError } from './errors.js';
export { GradientSharder } from './gradient-shard.js';
export { type Partition, partitionParameters } from './partition.js';
export { type OptimizerClass, optimizerStateBytes, ZeroRedundancyOptimizer, type ZeroOptions } from './zero-redundancy-optimizer.js';
export { fromRank0, loadShardedCheckpoint, MANIFEST_FILE, onEveryRank, saveShardedCheckpoint, ShardedCheckpointError, type ShardedManifest, shardFile } from './sharded-checkpoint.js';
