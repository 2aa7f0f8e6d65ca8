export { afterPreviousSave, checkpointGroupOf, fromRank0, onEveryRank } from './checkpoint-group.js';
export { ZeroError } from './errors.js';
export { GradientSharder } from './gradient-shard.js';
export { BufferPool } from './host-buffers.js';
export { checkBound, latestManifestEntry, readManifest } from './manifest-read.js';
export { type Partition, partitionParameters } from './partition.js';
export {
  afterLoadedEntry,
  checkSameParameters,
  type DifferingParameterError,
  parameterChecksums,
  withLoadedEntry,
} from './same-parameters.js';
export {
  MANIFEST_FILE,
  type ShardedCheckpointContents,
  ShardedCheckpointError,
  type ShardedManifest,
  saveShardedCheckpoint,
  shardFile,
} from './sharded-checkpoint.js';
export { latestShardedCheckpoint, loadShardedCheckpoint } from './sharded-checkpoint-load.js';
export {
  type OptimizerClass,
  optimizerStateBytes,
  type ZeroOptions,
  ZeroRedundancyOptimizer,
} from './zero-redundancy-optimizer.js';
