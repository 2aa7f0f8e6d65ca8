/**
 * Reading a sharded checkpoint's manifest (ZeRO's here, FSDP's in @ddp/fsdp, told apart by their
 * `format`), and binding the entry's files to it (@ddp/nn's checkpoint-binding: a file copied in
 * from another checkpoint is refused).
 */
import { join } from 'node:path';
import { latestEntry, type ParsedSafetensors, readSealedJson, SealedJsonError, unboundEntry } from '@ddp/nn';
import { MANIFEST_FILE, ShardedCheckpointError } from './sharded-checkpoint.js';

/** What binding reads of a manifest. */
interface BoundManifest {
  step: number;
  save?: string;
}

/** The entry's manifest, checked: its format, version and checksum, and its step against the entry's name. */
export async function readManifest<M extends BoundManifest>(
  entry: string,
  format: string,
  version: number,
): Promise<M> {
  const path = join(entry, MANIFEST_FILE);
  let manifest: M;
  try {
    manifest = (await readSealedJson(path, format, version)) as unknown as M;
  } catch (e) {
    throw e instanceof SealedJsonError ? new ShardedCheckpointError(e.message, path) : e;
  }
  checkBound(entry, manifest, []);
  return manifest;
}

/** Refuses files of `entry` (and its manifest) that another save wrote: one copied in from another checkpoint. */
export function checkBound(entry: string, manifest: BoundManifest, files: [string, ParsedSafetensors][]): void {
  const unbound = unboundEntry(entry, manifest, MANIFEST_FILE, files);
  if (unbound) throw new ShardedCheckpointError(unbound.message, unbound.file);
}

/**
 * The newest committed entry of `location`, or null when there is none; another kind's newest entry
 * there (another format's manifest, nn's checkpoint) is refused, as a load refuses it.
 */
export async function latestManifestEntry(location: string, format: string, version: number): Promise<string | null> {
  const entry = await latestEntry(location, MANIFEST_FILE);
  if (entry !== null) await readManifest(entry, format, version);
  return entry;
}
