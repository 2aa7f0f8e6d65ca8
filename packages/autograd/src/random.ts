import { AutogradArgumentError } from './errors.js';

// Seeds of unseeded random calls (dropout masks, randn, rand) come from this counter, so
// manualSeed() makes runs reproducible and checkpoint() can replay the same draws when it
// recomputes a segment (torch.manual_seed and preserve_rng_state).
let rngState = 0x5eed;

/**
 * Seeds the stream of unseeded dropout masks and random tensors (like torch.manual_seed). Its state
 * is 32 bits, the seed's low 32 (as torch's CPU generator, mt19937, takes them).
 */
export function manualSeed(seed: number): void {
  // 1.5, -1 or '7' were coerced (1, 2^32 − 1, 7) where nn's Generator refuses them: one seed, two streams
  if (!(Number.isSafeInteger(seed) && seed >= 0))
    throw new AutogradArgumentError(`manualSeed: seed must be an integer in [0, 2^53), got ${JSON.stringify(seed)}`);
  rngState = seed >>> 0;
}
/** The stream's state (torch.get_rng_state): save it in a checkpoint so a resumed run goes on drawing. */
export const getRngState = (): number => rngState;
/** Restores a state getRngState returned (torch.set_rng_state). */
export const setRngState = (state: number): void => {
  if (!(Number.isInteger(state) && state >= 0 && state <= 0xffffffff))
    throw new AutogradArgumentError(`setRngState: a state is an integer in [0, 2^32), got ${state}`);
  rngState = state;
};
/** The next seed of the stream, for a call given none. */
export function nextSeed(): number {
  rngState = (Math.imul(rngState, 1664525) + 1013904223) >>> 0;
  return rngState;
}
