// Temporary entries of a checkpoint directory (`.tmp-<host>-<pid>-<hex>`): their names, and when
// one is stale (its writer died, or it was abandoned in another PID namespace of this host).
import { randomBytes } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { diedOnThisHost, HOST, otherNamespaceHere } from './process-owner.js';

const TEMPORARY = /^\.tmp-(.+)-(\d+)-[0-9a-f]+$/;

/** How long a temporary of another PID namespace of this host may go unwritten before it counts as abandoned. */
const ABANDONED_MS = 60 * 60_000;

/**
 * A temporary whose writer provably died (this host and namespace, a process that no longer runs),
 * or one of another namespace of this host untouched for ABANDONED_MS: a container restarted
 * mid-save left it, and no pid there can be judged from here.
 */
export async function isStaleTemporary(dir: string, name: string): Promise<boolean> {
  const match = TEMPORARY.exec(name);
  if (match === null) return false;
  if (diedOnThisHost(match[1], Number(match[2]))) return true;
  if (!otherNamespaceHere(match[1])) return false;
  const path = join(dir, name);
  const files = await readdir(path).catch(() => [] as string[]);
  const times = await Promise.all(
    [path, ...files.map((f) => join(path, f))].map((p) =>
      stat(p).then(
        (s) => s.mtimeMs,
        () => 0,
      ),
    ),
  );
  return Date.now() - Math.max(...times) > ABANDONED_MS;
}

/**
 * A name for a temporary entry in dir; it carries host and pid, so its staleness can be proved. It is
 * also the save's id binding the entry's files (checkpoint-binding.ts): 64 random bits keep two saves
 * of one process apart.
 */
export function temporaryEntryName(): string {
  return `.tmp-${HOST}-${process.pid}-${randomBytes(8).toString('hex')}`;
}
