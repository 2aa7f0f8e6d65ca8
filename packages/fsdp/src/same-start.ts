import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { checkSameParameters, parameterChecksums } from '@ddp/zero';
import { FSDPError } from './errors.js';

/**
 * At the first forward every rank must hold the same model: each keeps its slice of what it had,
 * so models initialised per rank (a seed taken from the rank) would train as a whole made of each
 * rank's slice, silently (torch's FSDP too, unless sync_module_states). What each unit held is
 * kept here until the root's first forward compares it across the ranks.
 */
const pending = new WeakMap<object, Int32Array>();

/** CRC-32 of each of the unit's parameters, whole (at fullyShard, or after summonFullParams wrote them). */
export function recordStart(unit: object, params: readonly Tensor[]): void {
  pending.set(unit, parameterChecksums([...params]));
}

/**
 * The units' shards now hold a checkpoint's values (loadFSDPCheckpoint): what fullyShard found no
 * longer matters, and a model initialised per rank, then loaded, is the same model everywhere
 * (was refused at its first forward). Ranks that did not load still disagree with those that did.
 */
export function recordLoaded(units: readonly object[]): void {
  for (const u of units) if (pending.has(u)) pending.set(u, new Int32Array(0));
}

/** Compares what the units held across the ranks, once: collective for every rank's root forward. */
export async function checkSameStart(units: readonly object[], group: ProcessGroup): Promise<void> {
  if (!units.some((u) => pending.has(u))) return;
  const checksums = Int32Array.from(units.flatMap((u) => [...(pending.get(u) ?? [])]));
  for (const u of units) pending.delete(u);
  await checkSameParameters(checksums, group, (me, i, first, other) => {
    return new FSDPError(
      `rank ${me}: parameter ${i} of the sharded model differs between ranks ${first} and ${other} at the first ` +
        "forward: initialise the model alike on every rank (the same seed) or broadcast rank 0's parameters " +
        'before fullyShard',
    );
  });
}
