// Who wrote a file that carries its writer in its name (a temporary entry, a lock file), and
// whether that writer provably died.
import { hostname } from 'node:os';

/** This host's name as a file name part. */
export const HOST = hostname().replaceAll('/', '_');

export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The writer ran on this host as a process that no longer runs (another host's cannot be told). */
export function diedOnThisHost(host: string, pid: number): boolean {
  return host === HOST && pid !== process.pid && !processIsAlive(pid);
}
