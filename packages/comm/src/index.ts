export { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from '@ddp/half';
export { finishBeforeDestroyingGroups } from './api/background-work.js';
export { type GridSizes, gridGroupLists, ProcessGroupManager } from './api/grid.js';
export type { P2POp, ProcessGroup, ReduceScatterOptions } from './api/group.js';
export { allGatherObject, broadcastObject, gatherObject, scatterObject } from './api/object-collectives.js';
export { checkGroup, duplicateGroup, groupOrWorld, newGroup, newSubgroupsByEnumeration } from './api/subgroups.js';
export type { Work } from './api/work.js';
export {
  destroyProcessGroup,
  getDefaultGroup,
  getRank,
  getStore,
  getWireStats,
  getWorldSize,
  type InitOptions,
  initProcessGroup,
  isInitialized,
  type WireStats,
} from './api/world.js';
export { type CommArray, type Dtype, type HalfDtype, ReduceOp, sharedArray } from './dtypes.js';
export {
  AddressInUseError,
  AuthError,
  CollectiveMismatchError,
  CommError,
  CommTimeoutError,
  DuplicateRankError,
  EarlierAttemptError,
  GroupAbortedError,
  InvalidArgumentError,
  NotInitializedError,
  PeerLostError,
  ProtocolError,
  RankStalledError,
  RunMismatchError,
  WorldSizeMismatchError,
} from './errors.js';
export { type LaunchEnv, readLaunchEnv } from './rendezvous/env.js';
export { HashStore } from './store/hash-store.js';
export { PrefixStore } from './store/prefix-store.js';
export type { Store } from './store/store.js';
export { TCPStore, type TCPStoreOptions } from './store/tcp-store-client.js';
export { TCPStoreServer } from './store/tcp-store-server.js';
