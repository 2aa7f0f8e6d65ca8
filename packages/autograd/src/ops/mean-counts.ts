/**
 * What 'mean' losses averaged over, for a caller that weighs several means into one (a pipeline's
 * micro-batches: @ddp/pp checks its weights against them). Collected only inside withMeanCounts.
 */
let collecting: number[] | null = null;

/** fn's value, and how many entries each 'mean' loss computed inside it averaged over, in order. */
export function withMeanCounts<T>(fn: () => T): { value: T; counts: number[] } {
  const outer = collecting;
  const counts: number[] = [];
  collecting = counts;
  try {
    return { value: fn(), counts };
  } finally {
    collecting = outer;
  }
}

/** A 'mean' loss averaged over `count` entries. */
export function reportMeanCount(count: number): void {
  collecting?.push(count);
}
