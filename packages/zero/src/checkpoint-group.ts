/**
 * The collectives of a sharded save (@ddp/zero's and @ddp/fsdp's): on a group of the owner's own,
 * one save of an owner's at a time, every rank learning whether every rank succeeded.
 */
import { duplicateGroup, finishBeforeDestroyingGroups, type ProcessGroup } from '@ddp/comm';
import { ShardedCheckpointError } from './errors.js';

/**
 * Runs `work` on every rank, then every rank learns which ranks failed (their flags gathered), so
 * none waits on a failed peer, all fail together, and the others' errors name the failed ranks
 * (each of those raises its own error, naming its file and cause).
 */
export async function onEveryRank(group: ProcessGroup, work: () => Promise<void>, failure: string): Promise<void> {
  let error: unknown = null;
  try {
    await work();
  } catch (e) {
    error = e;
  }
  const flags = (await group.allGather(Int32Array.of(error === null ? 0 : 1)).wait()) as Int32Array[];
  const failed = group.ranks.filter((_, r) => flags[r][0] !== 0);
  if (failed.length === 0) return;
  const fs = error as NodeJS.ErrnoException | null;
  // a plain fs error of this rank's (mkdir, rename): typed as the other ranks' is, naming what failed
  if (fs?.name === 'Error' && typeof fs.syscall === 'string')
    throw new ShardedCheckpointError(`${failure}: ${fs.message}`, fs.path);
  throw (
    error ?? new ShardedCheckpointError(`${failure} (failed on rank ${failed.join(', ')}: its error names the cause)`)
  );
}

/** Rank 0's choice of `name` (a temporary entry's: under 300 bytes, host names being at most 253), on every rank. */
export async function fromRank0(group: ProcessGroup, name: string): Promise<string> {
  const buf = new Int32Array(512);
  if (group.rank === 0) buf.set(new TextEncoder().encode(name));
  await group.broadcast(buf, { src: 0 }).wait();
  return new TextDecoder().decode(Uint8Array.from(buf.subarray(0, buf.indexOf(0))));
}

/** Per owner (an optimizer, an FSDP root), its latest save (the next one's collectives wait for it). */
const savesInFlight = new WeakMap<object, Promise<unknown>>();

/**
 * `write` once `owner`'s previous save settled: one save of an owner's at a time, as two in flight
 * paired their identical collectives on the checkpoint group by position, so one could commit
 * without the other rank's shard. Shared with @ddp/fsdp's saves.
 */
export function afterPreviousSave<T>(owner: object, write: () => Promise<T>): Promise<T> {
  const previous = savesInFlight.get(owner);
  const saving = (async () => {
    await previous?.catch(() => {});
    return await write();
  })();
  savesInFlight.set(owner, saving);
  // a script's last save not awaited before destroyProcessGroup: its collectives were cut, no entry
  finishBeforeDestroyingGroups(saving);
  return saving;
}

const checkpointGroups = new WeakMap<object, Promise<ProcessGroup>>();

/**
 * The owner's checkpoint group (its group's ranks, collectives of their own), made at its first
 * save: a save not awaited runs beside training's collectives without meeting them.
 */
export function checkpointGroupOf(owner: { readonly processGroup: ProcessGroup }): Promise<ProcessGroup> {
  let group = checkpointGroups.get(owner);
  if (!group) {
    // its members only: newGroup on the mpi backend needs the whole world (a subgroup's save failed there)
    group = duplicateGroup(owner.processGroup);
    checkpointGroups.set(owner, group);
  }
  return group;
}
