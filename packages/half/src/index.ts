/**
 * float16 (IEEE 754 binary16) and bfloat16 codecs over Uint16Array bit patterns, for
 * compressed communication. Encoding rounds to nearest, ties to even; subnormals, ±0,
 * ±inf and NaN are kept. Input is float32: float64 values are first rounded to float32.
 */

function bitsOf(values: Float32Array | ArrayLike<number>): Uint32Array {
  const f32 = values instanceof Float32Array ? values : Float32Array.from(values);
  return new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
}

/** One float32 bit pattern to float16 bits. */
export function float32BitsToFloat16(f: number): number {
  const sign = (f >>> 16) & 0x8000;
  const exp = (f >>> 23) & 0xff;
  const mant = f & 0x7fffff;
  if (exp === 0xff) return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13); // inf, quiet NaN
  const e = exp - 127 + 15; // rebias
  if (e >= 0x1f) return sign | 0x7c00; // too large: overflow to inf
  if (e <= 0) {
    // float16 subnormal (or zero): shift the 24-bit significand down to units of 2^-24
    if (e < -10) return sign; // below half the smallest subnormal
    const sig = mant | 0x800000;
    const shift = 14 - e;
    let half = sig >>> shift;
    const rest = sig & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half++; // may carry into the smallest normal
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half++; // a carry may reach inf, as it should
  return sign | half;
}

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** One float16 bit pattern to its value. */
export function float16BitsToNumber(h: number): number {
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  scratchBits[0] = ((h & 0x8000) << 16) | ((exp + 112) << 23) | (mant << 13);
  return scratch[0];
}

type Encoder = (values: Float32Array | ArrayLike<number>, out?: Uint16Array) => Uint16Array;

/**
 * `out` if given, else a new array of `length`. An `out` of another length is refused: a typed
 * array ignores writes past its end, so a short one dropped values and a long one kept a stale tail.
 */
function outputOf<T extends Uint16Array | Float32Array>(
  name: string,
  out: T | undefined,
  length: number,
  make: (n: number) => T,
): T {
  if (out === undefined) return make(length);
  if (out.length !== length) throw new RangeError(`${name}: out has ${out.length} elements, the input ${length}`);
  return out;
}

/** An array encoder from a per-element float32-bits-to-16-bits function. */
function encoderOf(name: string, toBits: (f: number) => number): Encoder {
  return (values, out) => {
    const bits = bitsOf(values);
    const dst = outputOf(name, out, bits.length, (n) => new Uint16Array(n));
    for (let i = 0; i < bits.length; i++) dst[i] = toBits(bits[i]);
    return dst;
  };
}

export function decodeFloat16(halves: Uint16Array, out?: Float32Array): Float32Array {
  const dst = outputOf('decodeFloat16', out, halves.length, (n) => new Float32Array(n));
  for (let i = 0; i < halves.length; i++) dst[i] = float16BitsToNumber(halves[i]);
  return dst;
}

/** One float32 bit pattern to bfloat16 bits (the top 16 bits, rounded). */
export function float32BitsToBfloat16(f: number): number {
  if ((f & 0x7f800000) === 0x7f800000 && (f & 0x7fffff) !== 0) return ((f >>> 16) | 0x40) & 0xffff; // quiet NaN
  return ((f + 0x7fff + ((f >>> 16) & 1)) >>> 16) & 0xffff;
}

export function decodeBfloat16(halves: Uint16Array, out?: Float32Array): Float32Array {
  const dst = outputOf('decodeBfloat16', out, halves.length, (n) => new Float32Array(n));
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0; i < halves.length; i++) bits[i] = halves[i] << 16;
  return dst;
}

/** float32 values to float16 bits (round to nearest even). */
export const encodeFloat16: Encoder = encoderOf('encodeFloat16', float32BitsToFloat16);
/** float32 values to bfloat16 bits (round to nearest even). */
export const encodeBfloat16: Encoder = encoderOf('encodeBfloat16', float32BitsToBfloat16);

/** One number to float16 bits (rounded to float32 first, then to nearest even). */
export function floatToHalf(v: number): number {
  scratch[0] = v;
  return float32BitsToFloat16(scratchBits[0]);
}

/** One float16 bit pattern to its value (the same as float16BitsToNumber). */
export const halfToFloat = float16BitsToNumber;

/** One number to bfloat16 bits (rounded to float32 first, then to nearest even). */
export function floatToBfloat(v: number): number {
  scratch[0] = v;
  return float32BitsToBfloat16(scratchBits[0]);
}

/** One bfloat16 bit pattern to its value. */
export function bfloatToFloat(h: number): number {
  scratchBits[0] = h << 16;
  return scratch[0];
}
