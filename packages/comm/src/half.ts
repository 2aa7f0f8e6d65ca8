import type { HalfDtype } from './dtypes.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 word → number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** number → IEEE binary16 word, rounding to nearest even. */
export function floatToHalf(v: number): number {
  f32[0] = v;
  const x = u32[0] as number;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let r = mant >>> shift;
    if (rest > half || (rest === half && r & 1)) r++;
    return sign | r;
  }
  const rest = mant & 0x1fff;
  mant >>>= 13;
  if (rest > 0x1000 || (rest === 0x1000 && mant & 1)) {
    mant++;
    if (mant === 0x400) {
      mant = 0;
      e++;
      if (e >= 31) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | mant;
}

/** bfloat16 word → number. */
export function bfloatToFloat(h: number): number {
  u32[0] = h << 16;
  return f32[0] as number;
}

/** number → bfloat16 word, rounding to nearest even. */
export function floatToBfloat(v: number): number {
  f32[0] = v;
  const x = u32[0] as number;
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff; // quiet NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Widens 16-bit words to float32 (the reduction runs in float32). */
export function widenHalf(src: Uint16Array, dtype: HalfDtype, dst = new Float32Array(src.length)): Float32Array {
  if (dtype === 'bfloat16') {
    const d32 = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
    for (let i = 0; i < src.length; i++) d32[i] = (src[i] as number) << 16;
  } else {
    for (let i = 0; i < src.length; i++) dst[i] = halfToFloat(src[i] as number);
  }
  return dst;
}

/** Narrows float32 back to 16-bit words, rounding to nearest even. */
export function narrowHalf(src: Float32Array, dtype: HalfDtype, dst: Uint16Array): void {
  const f = dtype === 'bfloat16' ? floatToBfloat : floatToHalf;
  for (let i = 0; i < src.length; i++) dst[i] = f(src[i] as number);
}
