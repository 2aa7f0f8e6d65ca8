import { mpiWorld, newMpiGroup } from '../backends/mpi-world.js';
import { InvalidArgumentError } from '../errors.js';
import type { ProcessGroup } from './group.js';
import { WorkerProcessGroup } from './process-group.js';
import { addGroup, checkTimeout, current } from './world.js';

/**
 * A group of some global ranks. Collective over the world: every rank calls it, in the
 * same order, with the same ranks; non-members get null.
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
  const id = w.nextGroupId++;
  const me = group.ranks[group.rank];
  if (!members.includes(me)) return null;
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
