import { randomBytes } from 'node:crypto';
import { readdirSync, readlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { processExists } from './unix-socket.js';

/**
 * Who may leave a shared-memory segment's name behind. A group's segment is named after its first
 * local rank's token (`ddp-<pid namespace>-<pid>-<hex>-<group>`) and unlinked once every local rank
 * attached; a job killed before that left it in /dev/shm (17 MB each), and nothing removed it.
 */

/**
 * This process's PID namespace (the inode of /proc/self/ns/pid), '0' where it cannot be read. (nn's
 * process-owner.ts reads it too: the two share no package a process helper belongs in.)
 */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '0';
  } catch {
    return '0';
  }
}
const NAMESPACE = pidNamespace();
const SEGMENT = /^ddp-(\d+)-(\d+)-[0-9a-f]{16}-/;

/** The token a rank offers for the segments it may create: its namespace and pid, and a random part. */
export function segmentToken(): string {
  return `${NAMESPACE}-${process.pid}-${randomBytes(8).toString('hex')}`;
}

/**
 * Unlinks segment names in `dir` whose creator died: same PID namespace (another's pids mean nothing
 * here) and no process of that pid. A mapped segment lives on while mapped; only the name goes.
 * Returns the names removed.
 */
export function removeStaleSegments(dir = '/dev/shm'): string[] {
  if (NAMESPACE === '0') return [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((name) => {
    const m = SEGMENT.exec(name);
    if (!m || m[1] !== NAMESPACE || processExists(Number(m[2]))) return false;
    try {
      unlinkSync(join(dir, name));
      return true;
    } catch {
      return false; // another rank swept it first, or it is another user's
    }
  });
}
