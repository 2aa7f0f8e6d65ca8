/**
 * A seedable, counter-based random generator (Philox4x32-10, as in cuRAND and PyTorch's
 * CUDA generator). Its whole state is (seed, offset), so every rank seeded alike draws the
 * same numbers and a checkpoint restores the stream exactly.
 */
import { manualSeed as autogradManualSeed, registerCheckpointRngState } from '@ddp/autograd';
import { checkNumberOptions } from '@ddp/tensor';

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two uint32. */
function mulhi(a: number, b: number): number {
  const aHi = a >>> 16;
  const aLo = a & 0xffff;
  const bHi = b >>> 16;
  const bLo = b & 0xffff;
  const loLo = aLo * bLo;
  const hiLo = aHi * bLo;
  const loHi = aLo * bHi;
  const mid = (loLo >>> 16) + (hiLo & 0xffff) + (loHi & 0xffff);
  return (aHi * bHi + (hiLo >>> 16) + (loHi >>> 16) + Math.floor(mid / 0x10000)) >>> 0;
}

/** One Philox4x32-10 block: four uint32 words from a 128-bit counter and 64-bit key. */
export function philox4x32(counter: readonly number[], key: readonly number[]): Uint32Array {
  let [c0, c1, c2, c3] = counter.map((v) => v >>> 0) as [number, number, number, number];
  let k0 = (key[0] ?? 0) >>> 0;
  let k1 = (key[1] ?? 0) >>> 0;
  for (let round = 0; round < 10; round++) {
    if (round > 0) {
      k0 = (k0 + W0) >>> 0;
      k1 = (k1 + W1) >>> 0;
    }
    const hi0 = mulhi(M0, c0);
    const lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi(M1, c2);
    const lo1 = Math.imul(M1, c2) >>> 0;
    [c0, c1, c2, c3] = [(hi1 ^ c1 ^ k0) >>> 0, lo1, (hi0 ^ c3 ^ k1) >>> 0, lo0];
  }
  return Uint32Array.of(c0, c1, c2, c3);
}

/** What getState returns and setState takes; plain JSON. */
export interface GeneratorState {
  seed: number;
  /** 32-bit words drawn so far. */
  offset: number;
}

export class GeneratorStateError extends Error {
  override name = 'GeneratorStateError';
}

const TWO_POW_32 = 0x1_0000_0000;

function checkSeed(seed: number): number {
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new GeneratorStateError(`seed must be a non-negative safe integer, got ${seed}`);
  return seed;
}

export class Generator {
  private seed = 0;
  private offset = 0;
  private block: Uint32Array = new Uint32Array(4);
  private blockIndex = -1;

  constructor(seed = 0) {
    this.manualSeed(seed);
    liveGenerators.add(new WeakRef(this));
  }

  manualSeed(seed: number): this {
    this.seed = checkSeed(seed);
    this.offset = 0;
    this.blockIndex = -1;
    return this;
  }

  initialSeed(): number {
    return this.seed;
  }

  getState(): GeneratorState {
    return { seed: this.seed, offset: this.offset };
  }

  setState(state: GeneratorState): this {
    if (!Number.isSafeInteger(state.offset) || state.offset < 0) {
      throw new GeneratorStateError(`offset must be a non-negative safe integer, got ${state.offset}`);
    }
    this.seed = checkSeed(state.seed);
    this.offset = state.offset;
    this.blockIndex = -1;
    return this;
  }

  /** The next uniformly distributed uint32. */
  nextUint32(): number {
    const index = Math.floor(this.offset / 4);
    if (index !== this.blockIndex) {
      const counter = [index % TWO_POW_32, Math.floor(index / TWO_POW_32), 0, 0];
      this.block = philox4x32(counter, [this.seed % TWO_POW_32, Math.floor(this.seed / TWO_POW_32)]);
      this.blockIndex = index;
    }
    const word = this.block[this.offset % 4];
    this.offset++;
    return word;
  }

  /** Uniform in [0, 1) with 24 random bits, exact in float32 (as torch.rand). */
  nextFloat(): number {
    return (this.nextUint32() >>> 8) * 2 ** -24;
  }

  /** `n` draws from U[low, high). */
  uniform(n: number, low = 0, high = 1): Float32Array {
    checkDraw('uniform', n, { low, high });
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = low + (high - low) * this.nextFloat();
    return out;
  }

  /** `n` draws from N(mean, std²) by Box-Muller, two words a draw. */
  normal(n: number, mean = 0, std = 1): Float32Array {
    checkDraw('normal', n, { mean, std });
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const u1 = (this.nextUint32() + 1) / TWO_POW_32; // (0, 1]: log is finite
      const u2 = this.nextUint32() / TWO_POW_32;
      out[i] = mean + std * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    }
    return out;
  }

  /** An integer in [0, n), without modulo bias. */
  randint(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > TWO_POW_32) throw new RangeError(`randint needs 0 < n <= 2^32, got ${n}`);
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    for (;;) {
      const word = this.nextUint32();
      if (word < limit) return word % n;
    }
  }

  /** A random permutation of 0..n-1 (Fisher-Yates). */
  randperm(n: number): Int32Array {
    checkDraw('randperm', n, {});
    const out = Int32Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.randint(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

/** Every generator not yet collected: a layer's dropout draws its mask seed from one of them. */
const liveGenerators = new Set<WeakRef<Generator>>();

/**
 * checkpoint() replays a segment's forward during backward; its Dropout and attention dropout
 * must draw the same mask seeds again, so every generator's state is snapshotted with autograd's
 * own (torch's preserve_rng_state). Without it the recomputed masks differed from the forward's:
 * gradients through another mask, silently.
 */
registerCheckpointRngState({
  get: () => {
    const states = new Map<WeakRef<Generator>, GeneratorState>();
    for (const ref of liveGenerators) {
      const generator = ref.deref();
      if (generator) states.set(ref, generator.getState());
      else liveGenerators.delete(ref);
    }
    return states;
  },
  set: (states) => {
    for (const [ref, state] of states as Map<WeakRef<Generator>, GeneratorState>) ref.deref()?.setState(state);
  },
});

/** The generator layers draw from when none is given (torch.manual_seed's counterpart). */
export const defaultGenerator = new Generator(0);

/**
 * Seeds the layers' default generator and autograd's stream of unseeded draws (functional
 * dropout, randn, rand) alike, as torch.manual_seed seeds everything: it seeded the first only.
 */
export function manualSeed(seed: number): Generator {
  const generator = defaultGenerator.manualSeed(seed); // validates the seed first
  autogradManualSeed(seed);
  return generator;
}

/**
 * A count and numbers, as torch's TypeError: a config's '1' concatenated with each draw (uniform
 * gave 10.4–10.9 for [1, 2), normal NaN for every negative draw), silently.
 */
function checkDraw(where: string, n: number, numbers: Record<string, unknown>): void {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new GeneratorStateError(`Generator.${where}: n must be a non-negative integer, got ${JSON.stringify(n)}`);
  checkNumberOptions(`Generator.${where}`, numbers, Object.keys(numbers), (m) => new GeneratorStateError(m));
}
