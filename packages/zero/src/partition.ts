import type { Tensor } from '@ddp/autograd';

/** Which rank owns each parameter, and each rank's parameters in global order. */
export interface Partition {
  /** owner.get(p) = the rank that keeps p's optimizer state and updates p. */
  readonly owner: Map<Tensor, number>;
  /** byRank[r][g] = rank r's parameters of parameter group g, in the group's order. */
  readonly byRank: Tensor[][][];
  /** Elements owned by each rank. */
  readonly sizes: number[];
}

/**
 * PyTorch ZeroRedundancyOptimizer's sorted-greedy partition: within each parameter group,
 * parameters go largest first to the rank with the fewest elements so far (ties to the
 * lowest rank); loads carry over from group to group. Every rank computes the same result.
 */
export function partitionParameters(groups: readonly (readonly Tensor[])[], worldSize: number): Partition {
  const sizes = new Array<number>(worldSize).fill(0);
  const owner = new Map<Tensor, number>();
  for (const params of groups) {
    // a stable sort keeps equal sizes in their group order, so every rank agrees
    const sorted = [...params].sort((a, b) => b.size - a.size);
    for (const p of sorted) {
      let rank = 0;
      for (let r = 1; r < worldSize; r++) if (sizes[r] < sizes[rank]) rank = r;
      owner.set(p, rank);
      sizes[rank] += p.size;
    }
  }
  const byRank = Array.from({ length: worldSize }, (_, r) =>
    groups.map((params) => params.filter((p) => owner.get(p) === r)),
  );
  return { owner, byRank, sizes };
}
