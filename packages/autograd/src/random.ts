// Seeds of unseeded random calls (dropout masks, randn, rand) come from this counter, so
// manualSeed() makes runs reproducible and checkpoint() can replay the same draws when it
// recomputes a segment (torch.manual_seed and preserve_rng_state).
let rngState = 0x5eed;

/** Seeds the stream of unseeded dropout masks and random tensors (like torch.manual_seed). */
export function manualSeed(seed: number): void {
  rngState = seed >>> 0;
}
export const getRngState = (): number => rngState;
export const setRngState = (state: number): void => {
  rngState = state;
};
/** The next seed of the stream, for a call given none. */
export function nextSeed(): number {
  rngState = (Math.imul(rngState, 1664525) + 1013904223) >>> 0;
  return rngState;
}
