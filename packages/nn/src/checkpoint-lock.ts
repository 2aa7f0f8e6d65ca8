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
 * so removing it never removes a live holder's) or its pid names a process started since (reused); a
 * live holder here is waited for, however long it stalls (a stopped process: a lock broken under it
 * let two commits take one generation, and the later acknowledged save never loaded; probe CO). Another
 * host's is stale when older than STALE_MS, by the file system's clock (its age against the file
 * just written: two hosts' clocks may disagree): a commit holds the lock for milliseconds.
 * Hand-written rather than proper-lockfile, which tells a stale lock by its age alone (seconds of
 * waiting after every killed save, the moment an elastic restart meets) and breaks a live holder's
 * lock when its event loop stalls.
 */
import { randomBytes } from 'node:crypto';
import { readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CheckpointLockError } from './checkpoint-errors.js';
import { diedOnThisHost, HOST, HOST_NAME, startedAfter } from './process-owner.js';

const LOCK_FILE = /^\.lock-(.+)-(\d+)-[0-9a-f]+$/;
const STALE_MS = 30_000;
/** Past this, a lock taken and never stale means contenders that keep meeting: give up, typed. */
const WAIT_LIMIT_MS = 2 * STALE_MS;

/**
 * Whether `name` in dir is a stale lock file (never held again). `now`: the mtime of a file just written
 * in dir; null to judge this host's locks alone.
 */
export async function isStaleLock(dir: string, name: string, now: number | null): Promise<boolean> {
  const match = LOCK_FILE.exec(name);
  if (!match) return false;
  const [host, pid] = [match[1], Number(match[2])];
  if (diedOnThisHost(host, pid)) return true;
  const written = await stat(join(dir, name)).then(
    (s) => s.mtimeMs,
    () => null,
  );
  if (written === null) return false; // gone meanwhile: released
  if (host === HOST || host === HOST_NAME) return pid !== process.pid && startedAfter(pid, written);
  return now !== null && now - written > STALE_MS;
}

/** Runs `critical` holding dir's commit lock; dir must exist. */
export async function withCommitLock<T>(dir: string, critical: () => Promise<T>): Promise<T> {
  const own = await takeLock(dir);
  try {
    return await critical();
  } finally {
    await rm(join(dir, own), { force: true });
  }
}

async function takeLock(dir: string): Promise<string> {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    const own = `.lock-${HOST}-${process.pid}-${randomBytes(4).toString('hex')}`;
    await writeFile(join(dir, own), '', { flag: 'wx' });
    const now = (await stat(join(dir, own))).mtimeMs;
    const holders: string[] = [];
    for (const name of await readdir(dir)) {
      if (name === own || !LOCK_FILE.test(name)) continue;
      if (await isStaleLock(dir, name, now)) await rm(join(dir, name), { force: true });
      else holders.push(name);
    }
    if (holders.length === 0) return own;
    await rm(join(dir, own), { force: true });
    const waited = Date.now() - start;
    if (waited > WAIT_LIMIT_MS) throw new CheckpointLockError(dir, holders, waited);
    await sleep(1 + Math.random() * Math.min(50, 2 ** attempt));
  }
}
