import { crc32 } from 'node:zlib';
import type { ProcessGroup } from '../api/group.js';
import { CommError, InvalidArgumentError, NotInitializedError } from '../errors.js';
import { readLaunchEnv } from '../rendezvous/env.js';
import { refuseNonMpiLaunch, worldClash } from '../rendezvous/launch-agreement.js';
import { MpiProcessGroup } from './mpi-group.js';
import { type MpiComm, MpiRuntime, SPLIT } from './mpi-runtime.js';

// initProcessGroup({ backend: 'mpi' }) and the world functions on it: ranks and size come
// from MPI_COMM_WORLD (mpirun, srun with PMIx), no store, no ports.

const FINALIZE = 2;
const INIT = 0;

interface MpiWorld {
  rt: MpiRuntime;
  group: MpiProcessGroup;
  timeoutMs: number;
  destroyed: boolean;
}

let world: MpiWorld | null = null;
/** MPI may be initialised once per process (MPI_Init after MPI_Finalize is an error). */
let finalized = false;

export function mpiWorld(): MpiWorld | null {
  return world;
}

/**
 * Loads @ddp/mpi, starts MPI on its thread and returns the world group. `given`: initProcessGroup's
 * rank and worldSize, which must agree with MPI's (as the launch variables must).
 */
export async function initMpi(timeoutMs: number, given: { rank?: number; worldSize?: number }): Promise<ProcessGroup> {
  if (finalized)
    throw new CommError(
      'initProcessGroup: MPI was finalised by destroyProcessGroup and cannot start again in this process',
      { op: 'initProcessGroup' },
    );
  const mod = await import('@ddp/mpi').catch((e: unknown) => {
    throw new CommError(`initProcessGroup: backend 'mpi' needs the optional package @ddp/mpi: ${e}`, {
      op: 'initProcessGroup',
    });
  });
  const env = readLaunchEnv();
  refuseNonMpiLaunch(env);
  const addon = mod.loadMpi();
  if (!addon)
    throw new CommError(`initProcessGroup: backend 'mpi' is unavailable: ${mod.whyMissing()}`, {
      op: 'initProcessGroup',
    });
  const [status, , , message, rank, size] = await addon.call(INIT, 0, 0, 0, 0, 0, null, null, null, null);
  if (status !== 0)
    throw new CommError(`initProcessGroup: MPI_Init_thread failed: ${message}`, { op: 'initProcessGroup' });
  // the addon's one message on success: MPI granted less than MPI_THREAD_MULTIPLE (one thread for every group)
  if (message) process.emitWarning(`rank ${rank}: ${message}`, { code: 'DDP_MPI_THREAD_LEVEL' });
  const rt = new MpiRuntime(addon, rank, !message);
  const comm: MpiComm = { handle: 0, ranks: Array.from({ length: size }, (_, r) => r), rank, failed: null };
  const w: MpiWorld = {
    rt,
    timeoutMs,
    destroyed: false,
    group: new MpiProcessGroup(rt, comm, timeoutMs, () => w.destroyed),
  };
  world = w;
  const clash = worldClash(given, env, rank, size);
  if (clash) {
    await destroyMpi();
    throw new InvalidArgumentError(
      `rank ${rank}: initProcessGroup: MPI started this process as rank ${rank} of ${size}, but ${clash}: the ` +
        "mpi backend's world is MPI's; start the job with as many processes as the script expects (mpirun -np N)",
      { rank, op: 'initProcessGroup' },
    );
  }
  return w.group;
}

/**
 * Finalises MPI, unless a call is stuck in it (after a timeout): then it returns at once and
 * the process exits without MPI_Finalize, which makes mpirun stop the other ranks.
 */
export async function destroyMpi(): Promise<void> {
  const w = world;
  world = null;
  if (!w) return;
  w.destroyed = true;
  finalized = true;
  if (w.rt.stuck) return;
  const comm = { handle: 0, ranks: w.group.ranks, rank: w.group.rank, failed: null };
  const call = {
    kind: FINALIZE,
    rule: 0,
    type: 0,
    op: 0,
    root: 0,
    desc: null,
    counts: null,
    a: null,
    b: null,
  } as const;
  // behind the held calls of every group: dispatched after MPI_Finalize, they would fail
  await w.rt.order.issue('every', [], () => w.rt.run(comm, 'destroyProcessGroup', call, w.timeoutMs)).catch(() => {});
}

/** newGroup on the mpi backend: MPI_Comm_split of the world, collective over it like newGroup. */
export async function newMpiGroup(w: MpiWorld, members: number[], timeoutMs: number): Promise<ProcessGroup | null> {
  const me = w.group.ranks[w.group.rank];
  const inside = members.includes(me);
  const world0 = { handle: 0, ranks: w.group.ranks, rank: w.group.rank, failed: null };
  const call = {
    kind: SPLIT,
    rule: 0,
    type: 0,
    op: me,
    root: inside ? 0 : -1,
    desc: null,
    counts: null,
    a: null,
    b: null,
  } as const;
  // behind any held call of the world: its thread runs every rank's calls on it in issue order
  const split = w.rt.order.issue(0, [], () => w.rt.run(world0, 'newGroup', call, timeoutMs));
  const [, , , , handle] = await split.catch((error: Error) => {
    // a rank that skipped the call (the default backend allows it): MPI said only MPI_ERR_TRUNCATE
    if (error.message.includes('MPI error'))
      error.message += '; on the mpi backend every rank of the world calls newGroup, members or not, in one order';
    throw error;
  });
  if (!inside) return null;
  if (handle < 0) throw new InvalidArgumentError(`rank ${me}: newGroup: MPI gave no communicator`, { op: 'newGroup' });
  const comm: MpiComm = { handle, ranks: members, rank: members.indexOf(me), failed: null };
  const group = new MpiProcessGroup(w.rt, comm, timeoutMs, () => w.destroyed);
  await checkMembers(group, members, me);
  return group;
}

/**
 * MPI_Comm_split pairs the k-th newGroup of every rank, whatever its ranks: ranks that made their
 * groups in different orders got communicators of other members, and a group summed a rank that
 * was not in it, silently. Each member checks who is in the communicator and what the others made.
 */
async function checkMembers(group: MpiProcessGroup, members: number[], me: number): Promise<void> {
  const mine = Int32Array.of(me, crc32(members.join(',')) | 0); // what this rank made
  let seen: Int32Array[] | null = null;
  try {
    seen = (await group.allGather(mine).wait()) as Int32Array[];
  } catch {
    // a communicator of another size fails the call's own agreement: the same mistake
  }
  if (seen?.every((s, i) => s[0] === members[i] && s[1] === mine[1])) return;
  throw new InvalidArgumentError(
    `rank ${me}: newGroup([${members.join(', ')}]): the ranks made their groups in different orders ` +
      '(on the mpi backend every rank calls newGroup for every group, in the same order)',
    { op: 'newGroup', rank: me, ranks: members },
  );
}

export function mpiNotAvailable(what: string): never {
  throw new NotInitializedError(`${what}: not available on the mpi backend (it has no store or ddp sockets)`, {
    op: what,
  });
}
