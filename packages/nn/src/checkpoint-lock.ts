/**
 * The lock a checkpoint directory's commits take (checkpoint-dir.ts): processes saving into one
 * directory at once commit one after the other, each choosing the next generation, renaming its
 * entry to it and pointing `latest` at it while no other does. Without it two commits took one
 * generation, and a commit could land on an older entry another writer's clean-up was removing:
 * an acknowledged save gave way to one acknowledged before it.
 *
 * To take it, a process creates a file of its own, `.lock-<host>-<pid>-<hex>`, then lists the
 * directory: it holds the lock when no other lock file is there; otherwise it removes its file and
 * tries again after a random delay. Of two processes trying at once, the one listing second sees
 * the other's file, so two never both hold it (both may back off, then try again).
 * A lock file is stale when its process died on this host (removed at once: a name is used once,
 * so removing it never removes a live holder's), when its pid now names another process (its start,
 * recorded in the file, differs: reused), or when it names this process but is not one this process
 * holds (a restarted container's pid); a live holder here is waited for however long it stalls (a
 * lock broken under a stopped process let two commits take one generation, and the later
 * acknowledged save never loaded; probe CO). Another host's is stale when older than STALE_MS by
 * the file system's clock (its mtime against the waiting writer's new file: hosts' clocks may
 * disagree): a commit holds the lock for milliseconds.
 * Hand-written rather than proper-lockfile, which tells a stale lock by its age alone (seconds of
 * waiting after every killed save, the moment an elastic restart meets) and breaks a live holder's
 * lock when its event loop stalls.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CheckpointLockError } from './checkpoint-errors.js';
import { diedOnThisHost, HOST, HOST_NAME, processStart } from './process-owner.js';

const LOCK_FILE = /^\.lock-(.+)-(\d+)-[0-9a-f]+$/;
const STALE_MS = 30_000;
/** Past this, a lock taken and never stale means contenders that keep meeting: give up, typed. */
const WAIT_LIMIT_MS = 2 * STALE_MS;

/** The lock files this process holds (their paths): a lock naming this pid but not here is a former process's. */
const held = new Set<string>();

/**
 * Whether `name` in dir is a stale lock file (never held again). `now`: the mtime of a file just written
 * in dir; null to judge this host's locks alone.
 */
export async function isStaleLock(dir: string, name: string, now: number | null): Promise<boolean> {
  const match = LOCK_FILE.exec(name);
  if (!match) return false;
  const [host, pid] = [match[1], Number(match[2])];
  if (host === HOST || host === HOST_NAME) {
    if (pid === process.pid) return !held.has(resolve(dir, name));
    if (diedOnThisHost(host, pid)) return true;
    const recorded = await readFile(join(dir, name), 'utf8').catch(() => '');
    const start = processStart(pid);
    return recorded !== '' && start !== null && recorded !== start;
  }
  const written = await stat(join(dir, name)).then(
    (s) => s.mtimeMs,
    () => null,
  );
  return now !== null && written !== null && now - written > STALE_MS;
}

/** Runs `critical` holding dir's commit lock; dir must exist. */
export async function withCommitLock<T>(dir: string, critical: () => Promise<T>): Promise<T> {
  const own = await takeLock(dir);
  try {
    return await critical();
  } finally {
    await rm(join(dir, own), { force: true });
    held.delete(resolve(dir, own));
  }
}

async function takeLock(dir: string): Promise<string> {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    const own = `.lock-${HOST}-${process.pid}-${randomBytes(4).toString('hex')}`;
    held.add(resolve(dir, own));
    await writeFile(join(dir, own), processStart(process.pid) ?? '', { flag: 'wx' });
    const now = (await stat(join(dir, own))).mtimeMs;
    const holders: string[] = [];
    for (const name of await readdir(dir)) {
      if (name === own || !LOCK_FILE.test(name)) continue;
      if (await isStaleLock(dir, name, now)) await rm(join(dir, name), { force: true });
      else holders.push(name);
    }
    if (holders.length === 0) return own;
    await rm(join(dir, own), { force: true });
    held.delete(resolve(dir, own));
    const waited = Date.now() - start;
    if (waited > WAIT_LIMIT_MS) throw new CheckpointLockError(dir, holders, waited);
    await sleep(1 + Math.random() * Math.min(50, 2 ** attempt));
  }
}
