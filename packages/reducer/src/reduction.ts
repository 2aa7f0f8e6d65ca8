/**
 * One backward's progress. `ready`: marked ready (with a gradient or as zeros); `used`: got a gradient on this rank.
 */
export interface Reduction {
  nextBucket: number;
  ready: Uint8Array;
  used: Uint8Array;
  /** When the first gradient came (the autotune's clock). */
  startedAt: number;
  /** Gradient storage (dataIds) reduced in place in this iteration. */
  claimed: Set<object>;
}
