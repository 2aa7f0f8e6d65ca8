import { destroyMpi, initMpi, mpiNotAvailable, mpiWorld } from '../backends/mpi-world.js';
import {
  CommError,
  EarlierAttemptError,
  InvalidArgumentError,
  NotInitializedError,
  RunMismatchError,
} from '../errors.js';
import type { SharedMemory } from '../native.js';
import { readLaunchEnv } from '../rendezvous/env.js';
import { hostId } from '../rendezvous/host-id.js';
import { hostLayout } from '../rendezvous/host-layout.js';
import { placeFromOptions } from '../rendezvous/launch-agreement.js';
import { agreeOnWorldSize, claimRank, lingerIfTold, readAddresses } from '../rendezvous/rendezvous.js';
import { connectWorldStore, finishWorldStore } from '../rendezvous/world-store.js';
import { StagingPool } from '../scheduling/staging.js';
import { CommThread, MainRunner } from '../scheduling/threads.js';
import { HashStore } from '../store/hash-store.js';
import { PrefixStore } from '../store/prefix-store.js';
import type { Store } from '../store/store.js';
import { TCPStore } from '../store/tcp-store-client.js';
import { HEARTBEAT_CLOCK_BYTES } from '../transport/heartbeat.js';
import { mapSegment, sharedMemory } from '../transport/shm-lane.js';
import { removeStaleSegments, segmentToken } from '../transport/shm-segments.js';
import { type PeerAddress, wireCounterViews } from '../transport/socket-io.js';
import { removeStaleSocketFiles } from '../transport/unix-socket.js';
import { checkOptionKeys } from './arg-checks.js';
import { settleBackgroundWork } from './background-work.js';
import { markDestroyed } from './destroyed-groups.js';
import type { ProcessGroup } from './group.js';
import { WorkerProcessGroup } from './process-group.js';

export const DEFAULT_TIMEOUT_MS = 300_000;

export interface InitOptions {
  /** Rendezvous store; default: a TCPStore at MASTER_ADDR:MASTER_PORT hosted by rank 0 (none for a world of one). */
  store?: Store;
  rank?: number;
  worldSize?: number;
  /** Timeout of rendezvous and of every collective (default 300 s, or DDP_TIMEOUT_MS). */
  timeoutMs?: number;
  /**
   * 'default': ddp's own transports (shared memory, sockets); 'mpi': Open MPI through the
   * optional @ddp/mpi addon, under mpirun/srun (ranks from MPI_COMM_WORLD, no store). Default: DDP_COMM_BACKEND or
   * 'default'.
   */
  backend?: 'default' | 'mpi';
}

export interface World {
  thread: CommThread;
  main: MainRunner;
  store: Store;
  ownsStore: boolean;
  group: WorkerProcessGroup;
  staging: StagingPool;
  timeoutMs: number;
  /** This run's rendezvous namespace: newGroup agrees on group ids there. */
  rendezvous: Store;
  /** Groups this rank has made per member list (`0,2` → 1): the next one's store key. */
  groupsMade: Map<string, number>;
  wireStats: SharedArrayBuffer;
  /** Every rank's comm-thread address (host ids, shared-memory keys). */
  addrs: PeerAddress[];
  mem: SharedMemory | null;
  /** Shared-memory names this rank mapped (unlinked again at destroy, in case a peer never attached). */
  shmNames: string[];
  /** The name of the TCPStore initProcessGroup connected to (rendezvous/world-store.ts). */
  storeName: string | null;
}

let world: World | null = null;

/** The store's host learns of another run's ranks knocking (its own run carries on). */
function warnOtherRun(err: CommError): void {
  if (err instanceof RunMismatchError && !(err instanceof EarlierAttemptError)) process.emitWarning(err);
}

/** A timeout must be a positive number of milliseconds (Infinity allowed). */
export function checkTimeout(ms: number, op: string): number {
  if (typeof ms !== 'number' || !(ms > 0))
    throw new InvalidArgumentError(`${op}: timeoutMs must be a positive number of milliseconds, got ${ms}`, { op });
  return ms;
}

/**
 * Forms the world: reads rank/size from options or the launcher's environment, meets the
 * other ranks through the store, starts the comm worker and connects to every peer.
 */
export async function initProcessGroup(opts: InitOptions = {}): Promise<ProcessGroup> {
  const existing = (world ?? mpiWorld())?.group; // torch raises here too; the rank says which process did it
  const me = existing?.ranks[existing.rank];
  const twice = `rank ${me}: initProcessGroup: already initialised (call destroyProcessGroup first)`;
  if (existing) throw new CommError(twice, { rank: me, op: 'initProcessGroup' });
  checkOptionKeys('initProcessGroup', opts, ['store', 'rank', 'worldSize', 'timeoutMs', 'backend']);
  const backend = opts.backend ?? process.env.DDP_COMM_BACKEND ?? 'default';
  if (backend !== 'default' && backend !== 'mpi')
    throw new InvalidArgumentError(
      `initProcessGroup: unknown backend ${JSON.stringify(backend)} (expected 'default' or 'mpi')`,
      { op: 'initProcessGroup' },
    );
  const timeout = () =>
    checkTimeout(opts.timeoutMs ?? (Number(process.env.DDP_TIMEOUT_MS) || DEFAULT_TIMEOUT_MS), 'initProcessGroup');
  if (backend === 'mpi') return initMpi(timeout(), { rank: opts.rank, worldSize: opts.worldSize });
  const env = readLaunchEnv();
  const { rank, worldSize } = placeFromOptions(opts, env);
  const timeoutMs = timeout();
  // files of ranks that died (sockets from before abstract names, or off Linux)
  await removeStaleSocketFiles();
  removeStaleSegments();
  const ownsStore = !opts.store;
  const { secret, runId } = env;
  // a world of one needs nobody to meet: no server, no port
  const { store, name: storeName } =
    opts.store || worldSize === 1
      ? { store: opts.store ?? new HashStore(timeoutMs), name: null }
      : await connectWorldStore({
          host: env.masterAddr,
          port: env.masterPort,
          secret,
          runId,
          isServer: rank === 0,
          timeoutMs,
          rank,
          onConnectionError: warnOtherRun,
        });
  try {
    if (worldSize > 1) await agreeOnWorldSize(store, rank, worldSize);
    if (worldSize > 1 && ownsStore) await claimRank(store, rank, env.launcher);
    // a fresh namespace per init, so a store reused across inits never mixes generations
    const generation = Math.floor(((await store.add('ddp/init', 1)) - 1) / worldSize);
    const rdv = new PrefixStore(`ddp/${generation}`, store);
    const bindHost = env.bindAddr ?? (store instanceof TCPStore ? store.localAddress : '127.0.0.1');
    const forceTcp = process.env.DDP_TRANSPORT === 'tcp';
    const meshOpts = { rank, worldSize, secret, runId, hostId: hostId(), forceTcp };
    const wireStats = new SharedArrayBuffer(32);
    // the comm thread's heartbeat keeps time; the main thread's mesh reads it to recognise a stall of this process
    const heartbeatClock = new SharedArrayBuffer(HEARTBEAT_CLOCK_BYTES);
    const mem = sharedMemory();
    const { thread, address } = await CommThread.start({ ...meshOpts, bindHost, wireStats, heartbeatClock });
    const wireCounters = wireCounterViews(wireStats).mainThread;
    const main = new MainRunner({ ...meshOpts, wireCounters, heartbeatClock: new Float64Array(heartbeatClock) }, mem);
    let addrs: PeerAddress[] = [];
    try {
      const mainAddress = await main.listen(bindHost);
      await rdv.set(`addr/${rank}`, JSON.stringify({ ...address, shm: mem ? segmentToken() : null }));
      await rdv.set(`mainaddr/${rank}`, JSON.stringify(mainAddress));
      const read = (key: string) => readAddresses(rdv, store, key, { rank, worldSize, timeoutMs });
      let mainAddrs: PeerAddress[];
      [addrs, mainAddrs] = await Promise.all([read('addr'), read('mainaddr')]);
      await Promise.all([thread.connect(addrs, timeoutMs), main.connect(mainAddrs, timeoutMs)]);
    } catch (e) {
      await Promise.all([thread.close(), main.close()]);
      throw e;
    }
    // a group poisoned on one thread is poisoned on the other
    thread.onPoisoned = (groupId, err) => main.executor.groups.adoptPoison(groupId, err);
    main.executor.groups.onPoison = (groupId, err) => thread.poison(groupId, err);
    const ranks = Array.from({ length: worldSize }, (_, r) => r);
    const staging = new StagingPool();
    const group = new WorkerProcessGroup(thread, main, staging, 0, ranks, rank, timeoutMs);
    const w: World = {
      thread,
      main,
      store,
      ownsStore,
      group,
      staging,
      timeoutMs,
      rendezvous: rdv,
      groupsMade: new Map(),
      wireStats,
      addrs,
      mem,
      shmNames: [],
      storeName,
    };
    try {
      addGroup(w, 0, ranks);
    } catch (e) {
      await Promise.all([thread.close(), main.close()]);
      throw e;
    }
    world = w;
    return group;
  } catch (e) {
    const hostsStore = ownsStore && store instanceof TCPStore && store.server !== null;
    if (hostsStore) await lingerIfTold(e);
    if (ownsStore) await store.close();
    throw e;
  }
}

/** What this process has written to its peer connections since initProcessGroup. */
export interface WireStats {
  /** Frame headers, payloads and padding, heartbeats included: what the wire carried. */
  bytesSent: number;
  framesSent: number;
}

/**
 * Bytes and frames this process has sent to its peers, over every group (to check what a collective or a compression
 * really costs).
 */
export function getWireStats(): WireStats {
  if (mpiWorld()) mpiNotAvailable('getWireStats');
  if (!world) throw new NotInitializedError('getWireStats: call initProcessGroup first');
  const { commThread, mainThread } = wireCounterViews(world.wireStats);
  return { bytesSent: commThread[0] + mainThread[0], framesSent: commThread[1] + mainThread[1] };
}

/**
 * Closes the peer connections, the worker and (if initProcessGroup made it) the store, once the
 * background work that needs them is done; then raises that work's unreported failure, if any.
 * Given a subgroup, ends that group alone (its later calls raise NotInitializedError), as torch's
 * destroy_process_group(group); given null (what newGroup gave a non-member), nothing.
 */
export async function destroyProcessGroup(group?: ProcessGroup | null): Promise<void> {
  if (group === null) return;
  if (group !== undefined && isInitialized() && group !== getDefaultGroup()) return markDestroyed(group);
  const failure = await settleBackgroundWork();
  await closeGroups();
  if (failure != null) throw failure;
}

async function closeGroups(): Promise<void> {
  if (mpiWorld()) return destroyMpi();
  const w = world;
  world = null;
  if (!w) return;
  await w.main.close();
  await w.thread.close();
  for (const name of w.shmNames) w.mem?.unlink(name);
  if (w.storeName) finishWorldStore(w.storeName);
  if (w.ownsStore) await w.store.close();
}

export function isInitialized(): boolean {
  return world !== null || mpiWorld() !== null;
}

export function current(what: string): World {
  if (!world)
    throw new NotInitializedError(`${what}: the default process group is not initialised (call initProcessGroup)`, {
      op: what,
    });
  return world;
}

export function getDefaultGroup(): ProcessGroup {
  const mpi = mpiWorld();
  if (mpi) return mpi.group;
  return current('getDefaultGroup').group;
}

/** This rank in `group` (default: the world); -1 for null, what newGroup gave a non-member (as torch). */
export function getRank(group?: ProcessGroup | null): number {
  if (group === null) return -1;
  return (group ?? getDefaultGroup()).rank;
}

/** The size of `group` (default: the world); -1 for null, what newGroup gave a non-member (as torch). */
export function getWorldSize(group?: ProcessGroup | null): number {
  if (group === null) return -1;
  return (group ?? getDefaultGroup()).size;
}

/** The store the world met through (for rendezvous of higher layers). */
export function getStore(): Store {
  if (mpiWorld()) mpiNotAvailable('getStore');
  return current('getStore').store;
}

/**
 * Announces a group to both executors, with a shared-memory segment per host when every
 * member has the addon: for the whole group when all share this host, else for this host's
 * members when the group spans hosts evenly (the hierarchical all-reduce, host-layout.ts).
 * A segment is named after its lowest member's key, so the members of a host agree.
 */
export function addGroup(w: World, id: number, members: number[]): void {
  const peers = members.map((r) => w.addrs[r] as PeerAddress);
  const me = w.group.ranks[w.group.rank];
  const layout = hostLayout(
    peers.map((a) => a.hostId),
    members.indexOf(me),
  );
  const sameHost = peers.every((a) => a.hostId === (peers[0] as PeerAddress).hostId);
  const local = layout ? layout.local.map((i) => members[i]) : sameHost ? members : [];
  let shm: SharedArrayBuffer | null = null;
  if (w.mem && local.length > 1 && peers.every((a) => a.shm)) {
    const name = `/ddp-${(w.addrs[local[0]] as PeerAddress).shm}-${id}`;
    shm = mapSegment(w.mem, name, local.length, me);
    w.shmNames.push(name);
  }
  const hosts = shm ? layout : null;
  w.thread.addGroup(id, members, shm, hosts);
  w.main.addGroup(id, members, shm, hosts);
}
