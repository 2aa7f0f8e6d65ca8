import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { LoadedSave } from '@ddp/nn';
import { afterLoadedEntry, checkSameParameters, parameterChecksums, withLoadedEntry } from '@ddp/zero';
import { FSDPError } from './errors.js';

/**
 * At the first forward every rank must hold the same model: each keeps its slice of what it had,
 * so models initialised per rank (a seed taken from the rank) would train as a whole made of each
 * rank's slice, silently (torch's FSDP too, unless sync_module_states). What each unit held is
 * kept here until the root's first forward compares it across the ranks.
 */
const pending = new WeakMap<object, { checksums: Int32Array; loaded?: LoadedSave }>();

/** CRC-32 of each of the unit's parameters, whole (at fullyShard, or after summonFullParams wrote them). */
export function recordStart(unit: object, params: readonly Tensor[]): void {
  pending.set(unit, { checksums: parameterChecksums([...params]) });
}

/**
 * The units' shards now hold checkpoint entry `loaded`'s values (loadFSDPCheckpoint): what fullyShard
 * found no longer matters (a model initialised per rank, then loaded, is the same model everywhere),
 * but every rank must have loaded the same entry (@ddp/zero's withLoadedEntry): compared at the next
 * root forward. Ranks that did not load still disagree with those that did.
 */
export function recordLoaded(units: readonly object[], loaded: LoadedSave): void {
  for (const u of units) pending.set(u, { checksums: new Int32Array(0), loaded });
}

/** Compares what the units held across the ranks, once: collective for every rank's root forward. */
export async function checkSameStart(units: readonly object[], group: ProcessGroup): Promise<void> {
  if (!units.some((u) => pending.has(u))) return;
  const starts = units.map((u) => pending.get(u));
  for (const u of units) pending.delete(u);
  const loaded = starts.find((s) => s?.loaded !== undefined)?.loaded ?? null;
  const checksums = withLoadedEntry(loaded, Int32Array.from(starts.flatMap((s) => [...(s?.checksums ?? [])])));
  const differs = (me: number, i: number, first: number, other: number) =>
    new FSDPError(
      `rank ${me}: parameter ${i} of the sharded model differs between ranks ${first} and ${other} at the first ` +
        "forward: initialise the model alike on every rank (the same seed) or broadcast rank 0's parameters " +
        'before fullyShard',
    );
  await checkSameParameters(checksums, group, afterLoadedEntry(loaded, differs, FSDPError));
}
