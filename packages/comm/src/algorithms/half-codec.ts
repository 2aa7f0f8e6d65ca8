import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from '@ddp/half';
import type { HalfDtype } from '../dtypes.js';

/** Widens 16-bit words to float32 (the reduction runs in float32). */
export function widenHalf(src: Uint16Array, dtype: HalfDtype, dst = new Float32Array(src.length)): Float32Array {
  return dtype === 'bfloat16' ? decodeBfloat16(src, dst) : decodeFloat16(src, dst);
}

/** Narrows float32 back to 16-bit words, rounding to nearest even. */
export function narrowHalf(src: Float32Array, dtype: HalfDtype, dst: Uint16Array): void {
  (dtype === 'bfloat16' ? encodeBfloat16 : encodeFloat16)(src, dst);
}
