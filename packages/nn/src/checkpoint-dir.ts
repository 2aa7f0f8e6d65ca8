/**
 * A checkpoint location as a directory of immutable entries plus a pointer:
 *
 *   dir/00000007-step-120/   a complete checkpoint (generation 7, step 120)
 *   dir/latest -> 00000007-step-120
 *   dir/.tmp-<host>-<pid>-<hex>/   an entry being written (or left by a killed writer)
 *
 * A writer fills a temporary entry, fsyncs it, then, holding dir's commit lock (checkpoint-lock.ts,
 * so writers saving into one dir at once commit one after the other), renames it to the next
 * generation (the commit: one atomic rename), fsyncs dir and points `latest` at it (a symlink
 * renamed over the old one, for tools); then it removes what is stale. Readers take the complete
 * entry of the highest generation, so whatever moment a writer dies at, the newest committed
 * checkpoint is found. Stale: entries older than the newest (no commit ever takes a generation
 * below it, so removing them needs no lock); temporaries and lock files of a dead process on this
 * host (a live writer's, or another host's, are left alone); files of the old single-directory
 * layout (its metaFile and *.safetensors beside it). Anything else in dir is the user's and is kept.
 */
import { access, mkdir, readdir, readlink, rename, rm, stat, symlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { syncDirectory } from './atomic.js';
import { CheckpointError } from './checkpoint-errors.js';
import { isStaleLock, withCommitLock } from './checkpoint-lock.js';
import { isStaleTemporary, temporaryEntryName } from './checkpoint-temporaries.js';
import { processIsAlive } from './process-owner.js';

export const LATEST_LINK = 'latest';
const ENTRY = /^(\d{8})-step-(\d+)$/;
/** Temporaries of the old layout: `<dir>.tmp-<pid>-<hex>`, `<dir>.old-<pid>-<hex>` (and files' `.tmp-`). */
const LEGACY_TEMPORARY = /\.(?:tmp|old)-(\d+)-[0-9a-f]+$/;

/**
 * Test hook: `DDP_CHECKPOINT_CRASH_AT=<point>` kills this process with SIGKILL when a save
 * reaches that point, so tests can crash a real save between any two of its steps.
 */
export function crashPoint(point: string): void {
  if (process.env.DDP_CHECKPOINT_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}

/**
 * dir's names, or none when dir does not exist. Any other failure (EACCES on a directory that
 * cannot be listed, EIO) is raised: taken for "empty", a --resume started afresh from step 0.
 */
async function namesIn(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return [];
    throw new CheckpointError(`cannot list ${dir}: ${(error as Error).message}`, { cause: error });
  }
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

interface Entry {
  name: string;
  generation: number;
  step: number;
}

async function listEntries(dir: string): Promise<Entry[]> {
  const names = await namesIn(dir);
  return names
    .map((name) => ENTRY.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ name: m[0], generation: Number(m[1]), step: Number(m[2]) }))
    .sort((a, b) => b.generation - a.generation);
}

/** The complete entry (holding metaFile) of the highest generation in dir. */
async function newestEntry(dir: string, metaFile: string): Promise<Entry | undefined> {
  for (const entry of await listEntries(dir)) if (await exists(join(dir, entry.name, metaFile))) return entry;
  return undefined;
}

/**
 * The newest complete checkpoint under dir (one holding `metaFile`), or null. Falls back to the
 * old layouts: `metaFile` directly in dir, or (a crash of the old two-rename save) the newest
 * `<dir>.tmp-*` / `<dir>.old-*` sibling holding one.
 */
export async function latestEntry(dir: string, metaFile: string): Promise<string | null> {
  for (let highest = (await listEntries(dir))[0]; highest; ) {
    if (await exists(join(dir, highest.name, metaFile))) return join(dir, highest.name);
    // a newer commit's clean-up may have removed it since the listing (a save beside this load)
    const now = (await listEntries(dir))[0];
    if (now?.generation !== highest.generation) {
      highest = now;
      continue;
    }
    // a commit renames a complete entry into place: the highest one without metaFile is another
    // kind's (its JSON is another name) or was damaged afterwards, and taking the older one (or
    // none: a run started afresh) would hide that
    const path = join(dir, highest.name);
    const other = (await namesIn(path)).find((name) => name.endsWith('.json'));
    if (other) {
      throw new CheckpointError(
        `${path} has no ${metaFile} but a ${other}: ${dir} holds another kind of checkpoint (nn's, ZeRO's or ` +
          "FSDP's); load it with the function that saved it, and give each kind a directory of its own",
      );
    }
    const older = await newestEntry(dir, metaFile);
    throw new CheckpointError(
      `${path} has no ${metaFile}: the newest checkpoint is damaged; move it out of ${dir} ` +
        `to load ${older ? `the older ${older.name}` : 'nothing (no older checkpoint is there)'}`,
    );
  }
  if (await exists(join(dir, metaFile))) return dir;
  const parent = dirname(dir);
  const prefix = basename(dir);
  let newest: { path: string; mtime: number } | null = null;
  // the old layout's siblings: a parent that cannot be listed holds none we could read
  for (const name of await readdir(parent).catch(() => [] as string[])) {
    if (!name.startsWith(prefix) || LEGACY_TEMPORARY.exec(name)?.index !== prefix.length) continue;
    const mtime = await stat(join(parent, name, metaFile)).then(
      (s) => s.mtimeMs,
      () => null,
    );
    if (mtime !== null && (newest === null || mtime > newest.mtime)) newest = { path: join(parent, name), mtime };
  }
  return newest?.path ?? null;
}

/**
 * Refuses a step an entry's name cannot carry: a fractional, negative or non-finite step was
 * committed under a name the directory listing skips, so the older checkpoint loaded instead.
 */
export function checkStep(step: number): void {
  if (!(Number.isSafeInteger(step) && step >= 0))
    throw new CheckpointError(`step must be a non-negative integer, got ${step}`);
}

/**
 * Commits a fully written, fsynced temporary entry of dir as the newest checkpoint and returns
 * its path. The rename is the commit; the pointer switch follows under the same lock, the clean-up after it.
 */
export async function commitEntry(
  dir: string,
  temporary: string,
  step: number,
  metaFile: string,
  /** Runs under the commit lock with the newest complete entry's path; throwing refuses the commit. */
  beforeCommit?: (newest: string | null) => Promise<void>,
): Promise<string> {
  checkStep(step);
  await syncDirectory(temporary);
  crashPoint('before-commit');
  const name = await withCommitLock(dir, async () => {
    // a committed entry always holds its metaFile: the newest without ours is another kind's (a
    // ZeRO sharded checkpoint beside an nn one), which this commit's clean-up would have deleted
    // one listing: past this check the newest entry is complete, so it is the one beforeCommit reads
    const top = (await listEntries(dir))[0];
    if (top && !(await exists(join(dir, top.name, metaFile)))) {
      throw new CheckpointError(
        `${dir}: its newest entry ${top.name} has no ${metaFile}: another kind of checkpoint (or a damaged one), ` +
          'which committing here would delete; save into a directory of its own',
      );
    }
    await beforeCommit?.(top ? join(dir, top.name) : null);
    const generation = (top?.generation ?? 0) + 1;
    const name = `${String(generation).padStart(8, '0')}-step-${step}`;
    await rename(temporary, join(dir, name));
    await syncDirectory(dir);
    crashPoint('committed');
    // committed: what fails from here on is reported, not raised (a caller would take the save for
    // lost); readers find the entry by name, and the next save or load repairs the pointer
    await pointLatestAt(dir, name).catch((error: Error) =>
      warn(`${join(dir, name)} is committed`, 'pointing latest at it', error),
    );
    crashPoint('pointer-switched');
    return name;
  });
  await cleanCheckpointDir(dir, metaFile).catch((error: Error) =>
    warn(`${join(dir, name)} is committed`, 'removing the older entries', error),
  );
  return join(dir, name);
}

/** What fails after a commit, or in a best-effort repair: reported, not raised. */
function warn(where: string, what: string, error: Error): void {
  process.emitWarning(`${where}; ${what} failed: ${error.message}`, 'CheckpointWarning');
}

async function pointLatestAt(dir: string, name: string): Promise<void> {
  if ((await readlink(join(dir, LATEST_LINK)).catch(() => null)) === name) return;
  const link = join(dir, temporaryEntryName());
  await symlink(name, link);
  await rename(link, join(dir, LATEST_LINK)).catch(async (error: unknown) => {
    await rm(link, { force: true });
    throw error;
  });
  await syncDirectory(dir);
}

/**
 * Points `latest` at the newest complete entry (under the commit lock, only when it points
 * elsewhere: a save killed before its pointer switch), then removes what is provably stale (see
 * the module comment). Safe to run at any time, by any number of processes at once.
 */
export async function cleanCheckpointDir(dir: string, metaFile: string): Promise<void> {
  const names = await namesIn(dir);
  const stale = names.filter(isDeadLegacyTemporary);
  for (const name of names)
    if ((await isStaleTemporary(dir, name)) || (await isStaleLock(dir, name, null))) stale.push(name);
  const newest = await newestEntry(dir, metaFile);
  if (newest) {
    if ((await readlink(join(dir, LATEST_LINK)).catch(() => null)) !== newest.name) {
      // best effort: a pointer that cannot be set (`latest` a directory) must not keep the older entries
      await withCommitLock(dir, async () => {
        const now = await newestEntry(dir, metaFile);
        if (now) await pointLatestAt(dir, now.name);
      }).catch((error: Error) => warn(dir, 'pointing latest', error));
    }
    const older = (await listEntries(dir)).filter((e) => e.generation < newest.generation);
    stale.push(...older.map((e) => e.name));
    // the old layout's files, superseded by a committed entry; without its metaFile there is no old
    // layout, and a *.safetensors file there is the user's own
    if (names.includes(metaFile)) stale.push(...names.filter((n) => n === metaFile || n.endsWith('.safetensors')));
  }
  await Promise.all(stale.map((name) => rm(join(dir, name), { recursive: true, force: true })));
  if (newest || (await exists(join(dir, metaFile)))) await removeLegacySiblings(dir);
}

/** A file or directory of the old layout's temporaries (`<name>.tmp-<pid>-<hex>`, `.old-`) whose writer died. */
function isDeadLegacyTemporary(name: string): boolean {
  const match = LEGACY_TEMPORARY.exec(name);
  return match !== null && !processIsAlive(Number(match[1]));
}

/** `<dir>.tmp-*` / `<dir>.old-*` of dead writers, once dir holds a complete checkpoint (newer than they are). */
async function removeLegacySiblings(dir: string): Promise<void> {
  const parent = dirname(dir);
  const prefix = basename(dir);
  const names = (await readdir(parent).catch(() => [] as string[])).filter((name) => name.startsWith(prefix));
  const ours = (name: string) => LEGACY_TEMPORARY.exec(name)?.index === prefix.length;
  const stale = names.filter((name) => ours(name) && isDeadLegacyTemporary(name));
  await Promise.all(stale.map((name) => rm(join(parent, name), { recursive: true, force: true })));
}

/**
 * What a load reads: the newest complete entry (latestEntry), after a clean-up. The clean-up is
 * best effort, so a checkpoint on a read-only file system still loads.
 */
export async function entryToLoad(dir: string, metaFile: string): Promise<string | null> {
  await cleanCheckpointDir(dir, metaFile).catch(() => undefined);
  return latestEntry(dir, metaFile);
}

/**
 * Reads the newest complete entry of dir with `read`, or returns null when there is none. When
 * reading fails and a newer entry has been committed meanwhile (whose clean-up may have removed
 * files of the one being read: a save beside a load), it reads the newer one. A failure on the
 * newest entry is that entry's own (damage) and is raised.
 */
export async function readNewestEntry<T>(
  dir: string,
  metaFile: string,
  read: (entry: string) => Promise<T>,
): Promise<T | null> {
  for (let entry = await entryToLoad(dir, metaFile); entry !== null; ) {
    try {
      return await read(entry);
    } catch (error) {
      const newest = await latestEntry(dir, metaFile);
      if (newest === entry || newest === null) throw error;
      entry = newest;
    }
  }
  return null;
}

/** Creates dir (if needed) and an empty temporary entry in it; returns the entry's path. */
export async function createTemporaryEntry(dir: string, name = temporaryEntryName()): Promise<string> {
  await makeDirectories(dir);
  await mkdir(join(dir, name));
  return join(dir, name);
}

/**
 * `mkdir -p`, one level at a time. Node's recursive form reports a read-only file system as ENOENT
 * (as if dir were missing), and loops forever where mkdir answers ENOENT under a parent that exists
 * (procfs: a checkpoint dir under /proc spun at 100 % CPU).
 */
export async function makeDirectories(dir: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && (await stat(dir)).isDirectory()) return;
    if (code !== 'ENOENT' || dirname(dir) === dir) throw error;
    await makeDirectories(dirname(dir));
    // a second ENOENT, its parent now there, is the file system's own answer and is raised
    await mkdir(dir).catch((again: NodeJS.ErrnoException) => {
      if (again.code !== 'EEXIST') throw again;
    });
  }
}
