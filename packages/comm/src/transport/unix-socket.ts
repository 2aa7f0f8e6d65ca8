import { randomBytes } from 'node:crypto';
import { readdirSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where a rank's Unix-domain listener lives. On Linux: a name in the abstract namespace
 * (leading NUL), which has no file and vanishes with the process, so a rank killed with -9
 * leaves nothing behind; it is scoped to the network namespace, as "same host" (host-id.ts)
 * already is. Elsewhere: a file in the temp directory, unlinked at close, and swept by
 * removeStaleSocketFiles when a later world starts after a crash.
 */
export function unixSocketAddress(): string {
  const name = `ddp-${process.pid}-${randomBytes(6).toString('hex')}`;
  return process.platform === 'linux' ? `\0${name}` : join(tmpdir(), `${name}.sock`);
}

/** True for an address that is a file (to unlink at close), false for an abstract name. */
export function isSocketFile(address: string): boolean {
  return !address.startsWith('\0');
}

const SOCKET_FILE = /^ddp-(\d+)-[0-9a-f]+\.sock$/;

export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists, as another user's
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Nothing listens on the file: connecting is refused (a live listener of any pid namespace would accept). */
function nobodyListens(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ path });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/**
 * Removes `ddp-<pid>-<hex>.sock` files that ranks left in `dir` when they died: only those
 * whose pid no longer exists and on which nobody listens (a pid can look dead from another
 * pid namespace that shares the directory). Returns the paths removed.
 */
export async function removeStaleSocketFiles(dir = tmpdir()): Promise<string[]> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  await Promise.all(
    names.map(async (name) => {
      const m = SOCKET_FILE.exec(name);
      if (!m || processExists(Number(m[1]))) return;
      const path = join(dir, name);
      if (!(await nobodyListens(path))) return;
      try {
        unlinkSync(path);
        removed.push(path);
      } catch {
        // another rank swept it first, or it is another user's
      }
    }),
  );
  return removed;
}
