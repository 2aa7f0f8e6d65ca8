import { duplicateGroup, type ProcessGroup } from '@ddp/comm';

/** What this file needs of a DDP wrapper: its parameters, to see whether its module was freed. */
interface Wrapper {
  readonly params: readonly { param: { readonly isDisposed: boolean } }[];
}

/**
 * Wrappers made on each group and not disposed. Held strongly, not by WeakRef: whether one counts
 * must not depend on when each rank's garbage collector ran (the choice below is collective).
 */
const wrappersOn = new WeakMap<ProcessGroup, Set<Wrapper>>();

/**
 * The group a DDP wrapper's own collectives (buckets, flags, buffers) run on: the one given, or, when
 * another wrapper is alive on it (not disposed, its module not freed), a duplicate of it (collective:
 * every rank creates its wrappers in one order). Two models on one group (a GAN, two towers) whose
 * backwards ran at once — `Promise.all` of two `backward()`s — interleaved their end-of-backward
 * collectives in whatever order each rank's timing gave: a CollectiveMismatchError or, where two calls
 * had one shape (two like models' buffer broadcasts), one model's values in the other's, silently
 * (probe BO). On a group of its own each wrapper's collectives pair only with the same wrapper's.
 */
export async function commGroupFor(group: ProcessGroup): Promise<ProcessGroup> {
  const wrappers = wrappersOn.get(group) ?? wrappersOn.set(group, new Set()).get(group)!;
  for (const w of wrappers) if (w.params.every(({ param }) => param.isDisposed)) wrappers.delete(w);
  if (wrappers.size === 0) return group;
  return sparesOf(group).pop() ?? (await duplicateGroup(group));
}

/**
 * Duplicates disposed wrappers gave back, for the next ones (taken and given back in one order on every
 * rank): one made per create mapped shared memory it never gave back (0.35 MB a wrap; probe BP).
 */
const spares = new WeakMap<ProcessGroup, ProcessGroup[]>();
const sparesOf = (group: ProcessGroup) => spares.get(group) ?? spares.set(group, []).get(group)!;

/** Counts a wrapper made on `group` until releaseCommGroup. */
export function holdCommGroup(owner: Wrapper, group: ProcessGroup): void {
  wrappersOn.get(group)?.add(owner);
}

/** A wrapper's dispose (or failed create): it no longer counts; its duplicate group waits for the next one. */
export function releaseCommGroup(owner: Wrapper | null, group: ProcessGroup, comm: ProcessGroup): void {
  if (owner && !wrappersOn.get(group)?.delete(owner)) return; // disposed before
  if (comm !== group) sparesOf(group).push(comm);
}
