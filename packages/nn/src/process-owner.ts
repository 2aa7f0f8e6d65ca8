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

export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
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
 * Whether the process `pid` of this host started after `ms` (epoch milliseconds): a pid reused since a
 * file naming it was written. From /proc (start in clock ticks of 1/100 s since boot); false without it.
 */
export function startedAfter(pid: number, ms: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const boot = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    // btime is whole seconds: a start up to 1 s early looks 1 s late, so only later than that counts
    return boot * 1000 + ticks * 10 > ms + 1000;
  } catch {
    return false;
  }
}

/** Written on a host of this name from another PID namespace (another container, or this one before a restart). */
export const otherNamespaceHere = (host: string) => host !== HOST && host.startsWith(`${HOST_NAME}~pidns`);
