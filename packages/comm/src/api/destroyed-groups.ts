/**
 * Subgroups `destroyProcessGroup(group)` ended, as torch's `destroy_process_group(group)` ends that
 * group alone (the argument was ignored and the whole world torn down: its peers saw it leave).
 * The world's own end is its connections' closing.
 */
const destroyed = new WeakSet<object>();

export function markDestroyed(group: object): void {
  destroyed.add(group);
}

export function isDestroyed(group: object): boolean {
  return destroyed.has(group);
}
