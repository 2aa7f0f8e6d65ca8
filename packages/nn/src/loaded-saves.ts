import { basename } from 'node:path';
import { crc32 } from 'node:zlib';

/**
 * Which checkpoint save each module was last loaded from (loadCheckpoint). Each rank resolves a
 * directory's newest entry by itself, so a save committed between two ranks' loads resumed them from
 * different steps; DistributedDataParallel then broadcast rank 0's weights, but every rank kept its
 * own optimizer state and step, silently. A wrapper created over the module compares them across its
 * ranks (as ZeRO's and FSDP's next step compares the saves they loaded).
 */
export interface LoadedSave {
  /** The entry read. */
  path: string;
  /** Its save's id (the entry's name where the save had none). */
  save: string;
}

/** The entry at `path` whose JSON or manifest is `meta`, as a LoadedSave. */
export const loadedSave = (path: string, meta: { save?: string }): LoadedSave => ({
  path,
  save: meta.save ?? basename(path),
});

const loaded = new WeakMap<object, LoadedSave>();

export function noteLoadedSave(module: object, save: LoadedSave): void {
  loaded.set(module, save);
}

/** The save `module` was last loaded from, or null. */
export function loadedSaveOf(module: object): LoadedSave | null {
  return loaded.get(module) ?? null;
}

/** What ranks compare of the saves they loaded: 0 for none, else its id's CRC-32 with the low bit set (never 0). */
export const saveFingerprint = (save: LoadedSave | null): number => (save === null ? 0 : crc32(save.save) | 1);
