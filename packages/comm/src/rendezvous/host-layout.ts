/**
 * How the members of a group sit on hosts, for the hierarchical all-reduce
 * (algorithms/hierarchical.ts): reduce inside each host through shared memory, all-reduce
 * across hosts, share the result inside each host again. Every member computes the same
 * layout from the host ids all ranks exchanged at rendezvous (host-id.ts).
 */
export interface HostLayout {
  /** Group ranks on this rank's host, in group-rank order (this rank's shared-memory lane). */
  local: number[];
  /** Group ranks holding this rank's local index on each host, hosts in order of their lowest member. */
  across: number[];
  /** Every host's group ranks (hosts in that order): grid[h][i] holds local index i on host h. */
  grid: number[][];
}

/**
 * The layout of group rank `me`, or null where the hierarchy does not apply: all members on
 * one host (plain shared memory), one member per host (nothing to reduce inside a host), or
 * hosts with different numbers of members (every local rank must own a chunk on every host;
 * such groups use the flat algorithms over sockets).
 */
export function hostLayout(hostIds: readonly string[], me: number): HostLayout | null {
  const hosts = new Map<string, number[]>();
  hostIds.forEach((h, r) => {
    const list = hosts.get(h) ?? [];
    list.push(r);
    hosts.set(h, list);
  });
  const lists = [...hosts.values()];
  const perHost = (lists[0] as number[]).length;
  if (lists.length < 2 || perHost < 2 || lists.some((l) => l.length !== perHost)) return null;
  const local = hosts.get(hostIds[me]) as number[];
  const index = local.indexOf(me);
  return { local, across: lists.map((l) => l[index]), grid: lists };
}
