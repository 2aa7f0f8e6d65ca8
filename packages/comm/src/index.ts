export { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from '@ddp/half';
export { type CommArray, type Dtype, type HalfDtype, ReduceOp, sharedArray } from './dtypes.js';
export { type LaunchEnv, readLaunchEnv } from './env.js';
export {
  AddressInUseError,
  AuthError,
  CollectiveMismatchError,
  CommError,
  CommTimeoutError,
  GroupAbortedError,
  InvalidArgumentError,
  NotInitializedError,
  PeerLostError,
  ProtocolError,
  RankStalledError,
  RunMismatchError,
  WorldSizeMismatchError,
} from './errors.js';
export { type GridSizes, gridGroupLists, ProcessGroupManager } from './grid.js';
export type { P2POp, ProcessGroup } from './group.js';
export { HashStore } from './store/hash-store.js';
export { PrefixStore } from './store/prefix-store.js';
export type { Store } from './store/store.js';
export { TCPStore, type TCPStoreOptions } from './store/tcp-store-client.js';
export { TCPStoreServer } from './store/tcp-store-server.js';
export { newGroup, newSubgroupsByEnumeration } from './subgroups.js';
export type { Work } from './work.js';
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
} from './world.js';
