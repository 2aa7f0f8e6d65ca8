export { FSDPError } from './errors.js';
export { FlatShard } from './flat-shard.js';
export { FSDPModule, type FullyShardOptions, fullyShard } from './fully-shard.js';
