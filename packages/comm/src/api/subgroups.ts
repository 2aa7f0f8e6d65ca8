import { MpiProcessGroup } from '../backends/mpi-group.js';
import { mpiWorld, newMpiGroup } from '../backends/mpi-world.js';
import { CommTimeoutError, InvalidArgumentError } from '../errors.js';
import { decodeText } from '../store/store.js';
import { checkOptionKeys } from './arg-checks.js';
import type { ProcessGroup } from './group.js';
import { WorkerProcessGroup } from './process-group.js';
import { addGroup, checkTimeout, current, getDefaultGroup, type World } from './world.js';

/**
 * The id every member of `members` gives the group: the lowest member draws it from the store's
 * counter under a key naming the members and how many groups of them this rank has made; the
 * others read it there. An id counted on each rank instead let a rank that skipped a group
 * (or made them in another order) give one id to two groups: its data went into a group it
 * was not in, silently. As torch's new_group, it ends in a store barrier of every member: a
 * member returns only once all have read the id ('all'), so when one called newGroup with
 * other ranks, every member fails here instead of one returning a group that can never work;
 * and the lowest returns last (every other member 'left'), so it may destroy the world, and
 * with it the store, right after.
 */
async function agreedGroupId(w: World, members: number[], timeoutMs: number): Promise<number> {
  const list = members.join(',');
  const made = w.groupsMade.get(list) ?? 0;
  w.groupsMade.set(list, made + 1);
  const key = `group/${list}/${made}`;
  const me = w.group.ranks[w.group.rank];
  const [lowest, ...others] = members as [number, ...number[]];
  const store = w.rendezvous;
  // only a timeout means a member did not come: a lost store (PeerLostError) and the like are raised as they are
  const timedOut = (missing: number[], e: unknown) => {
    if (!(e instanceof CommTimeoutError)) return e;
    const who = `rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`;
    return new CommTimeoutError(
      `rank ${me}: newGroup([${list}]): ${who} did not make this group (group ${made + 1} of these ranks here) ` +
        `within ${timeoutMs} ms: every member must call newGroup for it, in the same order`,
      { rank: me, ranks: missing, op: 'newGroup', cause: e },
    );
  };
  /** The members that have not set `${key}/${step}/<rank>`. */
  const notYet = async (step: string) => {
    const missing = [];
    for (const r of others) if (!(await store.check([`${key}/${step}/${r}`]).catch(() => false))) missing.push(r);
    return missing;
  };
  const waitAll = (step: string) =>
    store.wait(
      others.map((r) => `${key}/${step}/${r}`),
      timeoutMs,
    );
  if (me === lowest) {
    const id = await w.rendezvous.add('group/next', 1); // world is group 0
    await store.set(key, String(id));
    try {
      await waitAll('read');
    } catch (e) {
      const missing = await notYet('read');
      // the members that did read fail at once, naming the same ranks
      await store.set(`${key}/all`, missing.join(',')).catch(() => {});
      throw timedOut(missing, e);
    }
    await store.set(`${key}/all`, 'ok');
    await waitAll('left').catch(async (e: unknown) => {
      throw timedOut(await notYet('left'), e);
    });
    return id;
  }
  try {
    await store.wait([key], timeoutMs);
  } catch (e) {
    throw timedOut([lowest], e);
  }
  const id = Number(decodeText(await store.get(key)));
  await store.set(`${key}/read/${me}`, '1');
  try {
    await store.wait([`${key}/all`], timeoutMs);
  } catch (e) {
    throw timedOut(await notYet('read'), e);
  }
  const all = decodeText(await store.get(`${key}/all`));
  if (all !== 'ok') throw timedOut(all.split(',').map(Number), new CommTimeoutError('the lowest member timed out'));
  await store.set(`${key}/left/${me}`, '1');
  return id;
}

/**
 * A group of some global ranks; every member calls it, in the same order for the same ranks
 * (non-members may, and get null). The members agree on its id through the rendezvous store.
 */
export async function newGroup(ranks: number[], opts: { timeoutMs?: number } = {}): Promise<ProcessGroup | null> {
  const mpi = mpiWorld();
  const { group, timeoutMs: defaultTimeout } = mpi ?? current('newGroup');
  const members = [...new Set(ranks)].sort((a, b) => a - b);
  if (
    members.length === 0 ||
    members.length !== ranks.length ||
    members.some((r) => !Number.isInteger(r) || r < 0 || r >= group.size)
  ) {
    throw new InvalidArgumentError(
      `newGroup: ranks [${ranks.join(', ')}] must be distinct ranks of the world of ${group.size}`,
      { op: 'newGroup' },
    );
  }
  checkOptionKeys('newGroup', opts, ['timeoutMs']);
  const timeoutMs = opts.timeoutMs === undefined ? defaultTimeout : checkTimeout(opts.timeoutMs, 'newGroup');
  if (mpi) return newMpiGroup(mpi, members, timeoutMs);
  const w = current('newGroup');
  const me = group.ranks[group.rank];
  if (!members.includes(me)) return null;
  const id = await agreedGroupId(w, members, timeoutMs);
  addGroup(w, id, members);
  return new WorkerProcessGroup(w.thread, w.main, w.staging, id, members, members.indexOf(me), timeoutMs);
}

/**
 * A group of `group`'s members whose collectives run apart from `group`'s (a checkpoint written
 * while training goes on), called by those members only. On the mpi backend newGroup needs every
 * rank of the world: ZeRO's and FSDP's saves on a subgroup (a data-parallel group of a dp × tp grid)
 * failed there and left MPI unusable. This splits the group's own communicator instead.
 */
export async function duplicateGroup(given: ProcessGroup, opts: { timeoutMs?: number } = {}): Promise<ProcessGroup> {
  // null (newGroup's answer outside the group) was a TypeError reading its ranks (probe AR)
  const group = groupOrWorld(given, 'duplicateGroup');
  checkOptionKeys('duplicateGroup', opts, ['timeoutMs']);
  const timeoutMs = opts.timeoutMs === undefined ? undefined : checkTimeout(opts.timeoutMs, 'duplicateGroup');
  if (group instanceof MpiProcessGroup) return group.duplicate(timeoutMs ?? group.timeoutMs);
  // the group's own timeout, as on mpi (was: the world's, so a duplicate of a short-timeout group waited longer)
  const own = (group as { timeoutMs?: number }).timeoutMs;
  const made = await newGroup([...group.ranks], { timeoutMs: timeoutMs ?? own });
  if (made === null) throw new InvalidArgumentError('duplicateGroup: this rank is not a member', { op: 'newGroup' });
  return made;
}

/**
 * One group per rank list (PyTorch's new_subgroups_by_enumeration); returns this rank's
 * group and all of them (null where this rank is not a member).
 */
export async function newSubgroupsByEnumeration(
  rankLists: number[][],
  opts: { timeoutMs?: number } = {},
): Promise<[ProcessGroup | null, (ProcessGroup | null)[]]> {
  const seen = new Set<number>();
  for (const r of rankLists.flat()) {
    if (seen.has(r))
      throw new InvalidArgumentError(`newSubgroupsByEnumeration: rank ${r} appears in two groups`, {
        op: 'newSubgroupsByEnumeration',
      });
    seen.add(r);
  }
  const groups: (ProcessGroup | null)[] = [];
  for (const ranks of rankLists) groups.push(await newGroup(ranks, opts));
  return [groups.find((g) => g !== null) ?? null, groups];
}

/**
 * `group` if it is a process group. newGroup is async (torch's new_group is not): a Promise of one
 * passed as a group was taken for a group of no size, and SyncBatchNorm and pipelineStep's dpGroup
 * exchanged nothing (each rank alone, silently); DDP, ZeRO and FSDP failed untyped.
 */
export function checkGroup<G extends ProcessGroup | null | undefined>(group: G, where: string): G {
  if (group === null || group === undefined || typeof (group as ProcessGroup).allReduce === 'function') return group;
  const what =
    group instanceof Promise ? 'a Promise (await newGroup(…) first)' : `not a process group (${typeof group})`;
  throw new InvalidArgumentError(`${where}: processGroup is ${what}`, { op: where });
}

/**
 * `group`, or the world's when it is undefined. null — what newGroup gives a rank outside the group —
 * is refused: a wrapper given it took the world instead, and its collectives met none of the members'
 * (a hang until the timeout, or another call's data). `where` names the caller.
 */
export function groupOrWorld(group: ProcessGroup | null | undefined, where: string): ProcessGroup {
  if (group !== null) return group === undefined ? getDefaultGroup() : checkGroup(group, where);
  throw new InvalidArgumentError(
    `${where}: processGroup is null, what newGroup gives a rank outside the group: call it on the group's members only`,
    { op: where },
  );
}
