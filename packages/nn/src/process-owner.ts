// Who wrote a file that carries its writer in its name (a temporary entry, a lock file), and
// whether that writer provably died.
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * The PID namespace this process's pids are numbered in (`/proc/self/ns/pid`'s inode), or '' where
 * there is no /proc. Containers sharing a host name and a directory number their processes apart:
 * a loader in one took a live writer's pid in another for a dead process and removed its entry.
 * (comm's shm-segments.ts reads it too: the two share no package a process helper belongs in.)
 */
function pidNamespace(): string {
  try {
    return `~pidns${/\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? ''}`;
  } catch {
    return '';
  }
}

/**
 * Where this process's pid means something, as a file name part: the host's name and its PID
 * namespace. Another namespace's writers are judged as another host's: never provably dead.
 */
export const HOST = hostname().replaceAll('/', '_') + pidNamespace();
/** The host's name alone: what names written before they carried the namespace hold. */
export const HOST_NAME = hostname().replaceAll('/', '_');

/** /proc/<pid>/stat's fields after the command name (state first), or null without it. */
function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Runs (a zombie does not: killed, not yet reaped, it holds nothing). */
export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const state = procStat(pid)?.[0];
  return state !== 'Z' && state !== 'X';
}

/**
 * The writer ran on this host, in this PID namespace, as a process that no longer runs (another
 * host's or namespace's cannot be told). Names written before they carried the namespace are
 * judged by the pid alone, as they were then.
 */
export function diedOnThisHost(host: string, pid: number): boolean {
  return (host === HOST || host === HOST_NAME) && pid !== process.pid && !processIsAlive(pid);
}

/**
 * When the process `pid` of this host started, as `<boot id>:<clock ticks since boot>` (/proc), or
 * null without /proc: what a file naming a pid records beside it, so that a pid reused since is told
 * apart from its writer without a wall clock (a file's mtime is the file system's; /proc/stat's btime
 * moves when the clock is stepped, and a live holder's lock looked stale; review).
 */
export function processStart(pid: number): string | null {
  const ticks = procStat(pid)?.[19];
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return ticks && boot ? `${boot}:${ticks}` : null;
  } catch {
    return null;
  }
}

/** Written on a host of this name from another PID namespace (another container, or this one before a restart). */
export const otherNamespaceHere = (host: string) => host !== HOST && host.startsWith(`${HOST_NAME}~pidns`);
