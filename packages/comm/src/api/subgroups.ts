import { mpiWorld, newMpiGroup } from '../backends/mpi-world.js';
import { CommTimeoutError, InvalidArgumentError } from '../errors.js';
import { decodeText } from '../store/store.js';
import type { ProcessGroup } from './group.js';
import { WorkerProcessGroup } from './process-group.js';
import { addGroup, checkTimeout, current, type World } from './world.js';

/**
 * The id every member of `members` gives the group: the lowest member draws it from the store's
 * counter under a key naming the members and how many groups of them this rank has made; the
 * others read it there. An id counted on each rank instead let a rank that skipped a group
 * (or made them in another order) give one id to two groups: its data went into a group it
 * was not in, silently. The lowest member returns once every member has read the id (as
 * torch's new_group ends in a store barrier): it may destroy the world, and with it the
 * store, right after.
 */
async function agreedGroupId(w: World, members: number[], timeoutMs: number): Promise<number> {
  const list = members.join(',');
  const made = w.groupsMade.get(list) ?? 0;
  w.groupsMade.set(list, made + 1);
  const key = `group/${list}/${made}`;
  const me = w.group.ranks[w.group.rank];
  const lowest = members[0];
  // only a timeout means a member did not come: a lost store (PeerLostError) and the like are raised as they are
  const timedOut = (who: string, e: unknown) => {
    if (!(e instanceof CommTimeoutError)) return e;
    return new CommTimeoutError(
      `rank ${me}: newGroup([${list}]): ${who} did not make this group (group ${made + 1} of these ranks here) ` +
        `within ${timeoutMs} ms: every member must call newGroup for it, in the same order`,
      { rank: me, ranks: members, op: 'newGroup', cause: e },
    );
  };
  if (me === lowest) {
    const id = await w.rendezvous.add('group/next', 1); // world is group 0
    await w.rendezvous.set(key, String(id));
    const reads = members.slice(1).map((r) => [r, `${key}/read/${r}`] as const);
    await w.rendezvous
      .wait(
        reads.map(([, k]) => k),
        timeoutMs,
      )
      .catch(async (e: unknown) => {
        const missing = [];
        for (const [r, k] of reads) if (!(await w.rendezvous.check([k]).catch(() => false))) missing.push(r);
        throw timedOut(`rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`, e);
      });
    return id;
  }
  try {
    await w.rendezvous.wait([key], timeoutMs);
  } catch (e) {
    throw timedOut(`rank ${lowest}`, e);
  }
  const id = Number(decodeText(await w.rendezvous.get(key)));
  await w.rendezvous.set(`${key}/read/${me}`, '1');
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
  if (members.length === 0 || members.some((r) => !Number.isInteger(r) || r < 0 || r >= group.size)) {
    throw new InvalidArgumentError(
      `newGroup: ranks [${ranks.join(', ')}] must be distinct ranks of the world of ${group.size}`,
      { op: 'newGroup' },
    );
  }
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
