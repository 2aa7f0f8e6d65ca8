export { AsyncCheckpointer } from './checkpoint-async.js';
export { latestFSDPCheckpoint, loadFSDPCheckpoint } from './checkpoint-load.js';
export { type FSDPManifest, MANIFEST_FILE, REPLICATED_FILE, saveFSDPCheckpoint, shardFile } from './checkpoint-save.js';
export { FSDPError } from './errors.js';
export { FlatShard } from './flat-shard.js';
export { FSDPModule, type FullyShardOptions, fullyShard } from './fully-shard.js';
