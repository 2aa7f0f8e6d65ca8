import type { Dtype, OpName, ReduceOp } from '../dtypes.js';
import type { SerializedError } from '../errors.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import type { PeerAddress } from '../transport/socket-io.js';

/** Messages between a ProcessGroup (main thread) and its comm worker thread. */

export interface InitRequest {
  type: 'init';
  rank: number;
  worldSize: number;
  secret: string;
  runId: string;
  hostId: string;
  forceTcp: boolean;
  bindHost: string;
  /** The comm thread's [bytes, frames] written to peers (wireCounterViews). */
  wireStats: SharedArrayBuffer;
  /** The comm thread's heartbeat clock, read by the main thread's mesh (heartbeat.ts). */
  heartbeatClock: SharedArrayBuffer;
}

export interface ConnectRequest {
  type: 'connect';
  addrs: PeerAddress[];
  timeoutMs: number;
}

export interface GroupRequest {
  type: 'group';
  groupId: number;
  ranks: number[];
  /** The segment of this host's members when all share a host or the group spans hosts evenly (shm-lane.ts). */
  shm: SharedArrayBuffer | null;
  /** Set when the group spans hosts evenly: the hierarchical all-reduce's shape (host-layout.ts). */
  hosts: HostLayout | null;
}

/** One point-to-point transfer of a batch (isend/irecv); peer is a group rank. */
export interface P2PEntry {
  kind: 'send' | 'recv';
  peer: number;
  tag: number;
  dtype: Dtype;
  /** Byte offset and element count inside the op's staging buffer. */
  byteOffset: number;
  count: number;
}

/** One op as an executor runs it (OpRequest: as posted to the comm thread). */
export interface OpSpec {
  groupId: number;
  op: OpName | 'p2p';
  seq: number;
  dtype: Dtype;
  reduceOp: ReduceOp;
  /** Root (broadcast, reduce, gather, scatter) as a group rank. */
  root: number;
  /** Element count in the fingerprint (0 where sizes may differ across ranks). */
  count: number;
  /** Staging buffer and the number of elements of the op's main array in it. */
  sab: SharedArrayBuffer | null;
  /** Byte offset of the op's data in sab (non-zero when the caller's array is shared memory). */
  sabOffset: number;
  length: number;
  /** scatter: input sizes at the root; allToAll: input sizes. */
  sizes?: number[];
  /** allToAll: output sizes. */
  outSizes?: number[];
  p2p?: P2PEntry[];
  timeoutMs: number;
}

export interface OpRequest extends OpSpec {
  type: 'op';
  id: number;
}

export interface CloseRequest {
  type: 'close';
}

/**
 * The main thread's executor poisoned a group (the comm thread's follows) or, `announce`, a call failed before reaching
 * one.
 */
export interface PoisonRequest {
  type: 'poison';
  groupId: number;
  error: SerializedError;
  /** Tell the other members too (nobody has yet). */
  announce: boolean;
}

export type ToWorker = InitRequest | ConnectRequest | GroupRequest | OpRequest | CloseRequest | PoisonRequest;

export interface OpResult {
  sab?: SharedArrayBuffer;
  sizes?: number[];
}

export type FromWorker =
  | { type: 'listening'; address: PeerAddress }
  | { type: 'connected' }
  | { type: 'closed' }
  | { type: 'failed'; error: SerializedError }
  | { type: 'poisoned'; groupId: number; error: SerializedError }
  | { type: 'done'; id: number; result?: OpResult; error?: SerializedError };
