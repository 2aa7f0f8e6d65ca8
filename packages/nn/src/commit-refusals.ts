/**
 * Checks `commitEntry` runs under the commit lock, given the directory's newest complete entry:
 * each refuses a commit whose clean-up would delete a checkpoint that is not this run's.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { commitEntry } from './checkpoint-dir.js';
import { CheckpointError } from './checkpoint-errors.js';
import { refuseOtherPart } from './checkpoint-parts.js';

/**
 * For kinds whose metadata files share a name (@ddp/zero's and @ddp/fsdp's manifest.json):
 * refuses a commit over a newest entry of another format (an FSDP save removed a ZeRO
 * checkpoint of the same directory, silently).
 */
export function refuseOtherFormat(metaFile: string, format: string) {
  return async (newest: string | null): Promise<void> => {
    if (newest === null) return;
    const found = (await readJson(join(newest, metaFile)))?.format;
    // a damaged manifest of this kind is the loader's to report; saving past it goes on as before
    if (typeof found !== 'string' || found === format) return;
    throw new CheckpointError(
      `${newest} is a ${found}, not a ${format}, and committing beside it would delete it; save into a ` +
        'directory of its own',
    );
  };
}

/** A manifest's fields, or null when it cannot be read (a damaged one is the loader's to report). */
const readJson = (path: string) =>
  readFile(path, 'utf8')
    .then((text) => JSON.parse(text) as Record<string, unknown>)
    .catch(() => null);

/** By owner (the model, optimizer, FSDP root or checkpointer that saved), by resolved directory, its last entry. */
const committedBy = new WeakMap<object, Map<string, string>>();

/** Records that `owner`'s save committed `entry` (a path inside its checkpoint directory). */
export function noteCommitted(owner: object, entry: string): void {
  const byDir = committedBy.get(owner) ?? new Map<string, string>();
  byDir.set(resolve(dirname(entry)), resolve(entry));
  committedBy.set(owner, byDir);
}

/**
 * A save's `expectNewest` (the entry this run last saved or loaded; null: none; undefined: not
 * checked): refuses the commit unless the newest entry is that one, or the one `owner`'s saves
 * committed there last (saves issued back to back, whose caller cannot know the earlier one's
 * entry yet). Two runs given one directory deleted each other's checkpoints in their clean-ups,
 * and both exited 0.
 */
export function refuseOtherRun(where: string, expected: string | null | undefined, owner: object) {
  const at = (path: string | null | undefined) => (path ? resolve(path) : null);
  return (newest: string | null): void => {
    if (expected === undefined || at(newest) === at(expected)) return;
    if (newest !== null && committedBy.get(owner)?.get(resolve(dirname(newest))) === resolve(newest)) return;
    throw new CheckpointError(
      `${where}: the newest checkpoint there is ${newest ?? 'none'}, not ${expected ?? 'none'} as this run ` +
        'expects: another run saves into this directory, and this commit would delete its checkpoints. ' +
        'Give each run a directory of its own',
    );
  };
}

/**
 * commitEntry for the kinds whose metadata files share a name (@ddp/zero's and @ddp/fsdp's
 * manifest.json), checked as their saves need: another format's newest entry, another run's
 * (`expectNewest`, `owner` the saving object), or this step of another part of the model (`part`:
 * checkpoint-parts.ts's modelPart) is refused; the owner's commit is recorded.
 */
export async function commitManifestEntry(
  dir: string,
  temporary: string,
  step: number,
  manifest: { file: string; format: string },
  check: { where: string; expectNewest: string | null | undefined; owner: object; part: string },
): Promise<string> {
  const otherFormat = refuseOtherFormat(manifest.file, manifest.format);
  const otherRun = refuseOtherRun(check.where, check.expectNewest, check.owner);
  const committed = await commitEntry(dir, temporary, step, manifest.file, async (newest) => {
    await otherFormat(newest);
    otherRun(newest);
    const read = newest && (await readJson(join(newest, manifest.file)));
    refuseOtherPart(check.where, dir, read || null, step, check.part);
  });
  noteCommitted(check.owner, committed);
  return committed;
}
