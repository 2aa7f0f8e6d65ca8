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

/** A reduction of `params` gradients starting at bucket `nextBucket` (a joined rank's shadow starts past the last). */
export function newReduction(params: number, nextBucket: number): Reduction {
  return {
    nextBucket,
    ready: new Uint8Array(params),
    used: new Uint8Array(params),
    startedAt: performance.now(),
    claimed: new Set(),
  };
}
