import { DataArgumentError } from './errors.js';

/** Serializable state of a Generator (four 32-bit words of xoshiro128**). */
export type GeneratorState = readonly [number, number, number, number];

/** splitmix32: spreads a seed over the state words so nearby seeds give unrelated streams. */
function splitmix32(x: number): [number, number] {
  const next = (x + 0x9e3779b9) | 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return [next, (z ^ (z >>> 16)) >>> 0];
}

/**
 * Seedable PRNG (xoshiro128**), the role of torch.Generator: the same seed gives the same
 * stream on every process and platform, so every rank can draw the same permutation.
 * Seeds are integers in [0, 2^53).
 */
export class Generator {
  private s = new Uint32Array(4);

  constructor(seed = 0) {
    this.manualSeed(seed);
  }

  manualSeed(seed: number): this {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new DataArgumentError(`Generator seed must be an integer in [0, 2^53), got ${seed}`);
    }
    // The low 32 bits seed splitmix32; the high 21 go into the second word. The first word alone
    // gives back the low bits (splitmix32's output is a bijection), so every seed has a state of its
    // own: seeds folded into 32 bits (low ^ high·c) gave 2^32 and 668265261 one order, silently.
    // Seeds below 2^32 keep the streams they always had.
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      const [next, out] = splitmix32(x);
      x = next;
      this.s[i] = out;
    }
    this.s[1] ^= Math.floor(seed / 2 ** 32);
    if ((this.s[0] | this.s[1] | this.s[2] | this.s[3]) === 0) this.s[0] = 1;
    return this;
  }

  getState(): GeneratorState {
    return [this.s[0], this.s[1], this.s[2], this.s[3]];
  }

  setState(state: GeneratorState): this {
    // Uint32Array.set wraps what is not a uint32 (2^32 → 0, -1 → 2^32-1, NaN → 0) silently: an
    // all-zero state that way never leaves zero, and every permutation after it was the same.
    const word = (w: unknown) => Number.isInteger(w) && (w as number) >= 0 && (w as number) < 2 ** 32;
    if (!Array.isArray(state) || state.length !== 4 || !state.every(word) || state.every((w) => w === 0)) {
      throw new DataArgumentError(
        `Generator state must be four integers in [0, 2^32), not all zero; got ${JSON.stringify(state)}`,
      );
    }
    this.s.set(state);
    return this;
  }

  /** Next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform float in [0, 1) with 32 bits of randomness. */
  random(): number {
    return this.nextUint32() / 2 ** 32;
  }

  /** Uniform integer in [0, n), unbiased (rejection sampling), n ≤ 2^32. */
  randint(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > 2 ** 32) {
      throw new DataArgumentError(`randint bound must be an integer in [1, 2^32], got ${n}`);
    }
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }

  /** A uniformly random permutation of 0..n-1 (Fisher–Yates), like torch.randperm. */
  randperm(n: number): Int32Array {
    if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) {
      throw new DataArgumentError(`randperm size must be an integer in [0, 2^31), got ${n}`);
    }
    const perm = new Int32Array(n);
    for (let i = 0; i < n; i++) perm[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.randint(i + 1);
      const tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    return perm;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
