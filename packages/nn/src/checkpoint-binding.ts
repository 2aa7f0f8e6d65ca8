/**
 * The files of one checkpoint entry bound to each other. Each file checks itself (checksums), but
 * a file copied in from another checkpoint (another run, another step: `cp` of one file while
 * repairing a directory) passed every check and was loaded beside the others, silently. A save
 * therefore names itself with an id (its temporary entry's name: host, pid and random bytes),
 * written into every safetensors file's metadata and into the entry's JSON; a load refuses a file
 * whose id differs. Used by nn's checkpoints and by @ddp/zero's and @ddp/fsdp's sharded ones.
 */
import { basename, join } from 'node:path';
import { bytesOf } from './safetensors.js';
import type { ParsedSafetensors } from './safetensors-read.js';

/** The safetensors metadata key holding the id of the save that wrote the file. */
export const SAVE_ID = 'ddp.save';

const ENTRY_STEP = /^\d{8}-step-(\d+)$/;

/** `metadata` with the save's id added. */
export function withSaveId(id: string, metadata: Record<string, string> = {}): Record<string, string> {
  return { ...metadata, [SAVE_ID]: id };
}

/**
 * Why `file` (at `path`) is not of the save that wrote `metaFile` (whose id is `id`; undefined in
 * checkpoints written before ids were), or null when it is.
 */
function otherSave(file: ParsedSafetensors, path: string, id: string | undefined, metaFile: string) {
  const found = file.metadata[SAVE_ID];
  if (found === id) return null;
  return (
    `${path} was written by another save than its ${metaFile} (save ${found ?? 'unnamed'}, expected ` +
    `${id ?? 'unnamed'}): a file copied in from another checkpoint; restore the entry whole`
  );
}

/**
 * Why the entry `path` holds another step than its name says (an entry's JSON copied in from
 * another checkpoint), or null when it does not (or `path` is not an entry: the old layout).
 */
function otherStep(path: string, step: number, metaFile: string): string | null {
  const named = ENTRY_STEP.exec(basename(path));
  if (named === null || Number(named[1]) === step) return null;
  const why = `its ${metaFile} is of step ${step}, the entry's name says step ${named[1]}`;
  return `${path}: ${why}: a file copied in from another checkpoint; restore the entry whole`;
}

/**
 * The first reason the entry `path` is not one save's (its step, then each file read of it, by
 * name), with the file at fault; or null. `meta` is the entry's JSON (`metaFile`).
 */
export function unboundEntry(
  path: string,
  meta: { step: number; save?: string },
  metaFile: string,
  files: [string, ParsedSafetensors | null][],
): { file: string; message: string } | null {
  const step = otherStep(path, meta.step, metaFile);
  if (step) return { file: join(path, metaFile), message: step };
  for (const [name, file] of files) {
    const message = file && otherSave(file, join(path, name), meta.save, metaFile);
    if (message) return { file: join(path, name), message };
  }
  return null;
}

/**
 * Whether two safetensors files hold the same state: the same tensors (names, dtypes, shapes and
 * bytes) and metadata, apart from the save's id (parsed metadata holds no checksums). Two saves of
 * one state differ in those bytes alone (a resumed run against an uninterrupted one).
 */
export function sameContents(a: ParsedSafetensors, b: ParsedSafetensors): boolean {
  const { [SAVE_ID]: _a, ...metaA } = a.metadata;
  const { [SAVE_ID]: _b, ...metaB } = b.metadata;
  if (JSON.stringify(metaA) !== JSON.stringify(metaB) || a.tensors.size !== b.tensors.size) return false;
  for (const [name, t] of a.tensors) {
    const u = b.tensors.get(name);
    if (!u || u.dtype !== t.dtype || `${u.shape}` !== `${t.shape}`) return false;
    if (!view(bytesOf(t.data)).equals(view(bytesOf(u.data)))) return false;
  }
  return true;
}

/** A Buffer over the same bytes (Buffer.from of a Uint8Array copies them). */
const view = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);
