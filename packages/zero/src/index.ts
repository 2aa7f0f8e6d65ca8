export { ZeroError } from './errors.js';
export { GradientSharder } from './gradient-shard.js';
export { type Partition, partitionParameters } from './partition.js';
export {
  fromRank0,
  loadShardedCheckpoint,
  MANIFEST_FILE,
  onEveryRank,
  ShardedCheckpointError,
  type ShardedManifest,
  saveShardedCheckpoint,
  shardFile,
} from './sharded-checkpoint.js';
export {
  type OptimizerClass,
  optimizerStateBytes,
  type ZeroOptions,
  ZeroRedundancyOptimizer,
} from './zero-redundancy-optimizer.js';
