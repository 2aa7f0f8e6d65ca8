import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * Identifies "the same host" for the Unix-socket transport: hostname, network namespace
 * and boot id. Ranks in different network namespaces (the two-host test) count as
 * different hosts and talk TCP.
 */
export function hostId(): string {
  let netns = '';
  let boot = '';
  try {
    netns = readlinkSync('/proc/self/ns/net');
  } catch {}
  try {
    boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {}
  return `${hostname()}|${netns}|${boot}`;
}
