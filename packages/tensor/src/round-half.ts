import { float16BitsToNumber, float32BitsToBfloat16, float32BitsToFloat16 } from '@ddp/half';
import type * as tf from '@tensorflow/tfjs-core';
import { runFused } from './native-fused.js';
import { tensorFromFloat32 } from './transfer.js';

/** The 16-bit floating-point formats values are rounded to (autocast's dtypes). */
export type HalfPrecision = 'bfloat16' | 'float16';

/**
 * float32 bits rounded to `dtype` and widened back, as PyTorch's `x.to(dtype).float()` on a CPU:
 * round to nearest even, subnormals kept, overflow to ±inf; NaN as ATen writes it (bfloat16:
 * 0xFFFF0000 whatever the sign and payload; float16: the sign with the quiet NaN 0x7FC00000).
 */
export function roundBitsToHalf(bits: number, dtype: HalfPrecision): number {
  const nan = (bits & 0x7fffffff) > 0x7f800000;
  if (dtype === 'bfloat16') return nan ? 0xffff0000 : (float32BitsToBfloat16(bits) << 16) >>> 0;
  if (nan) return ((bits & 0x80000000) | 0x7fc00000) >>> 0;
  return widened(float16BitsToNumber(float32BitsToFloat16(bits)));
}

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);
function widened(value: number): number {
  scratch[0] = value;
  return scratchBits[0];
}

/**
 * t's float32 values rounded to `dtype` precision (roundBitsToHalf), as a new float32 tensor: one
 * native pass on the wasm heap where the native kernels are on, a host loop elsewhere.
 */
export function roundToPrecision(t: tf.Tensor, dtype: HalfPrecision): tf.Tensor {
  const native = runFused('DdpRoundToHalf', [t], { float16: dtype === 'float16' });
  if (native) return native[0];
  const values = Float32Array.from(t.dataSync() as Float32Array);
  const bits = new Uint32Array(values.buffer);
  for (let i = 0; i < bits.length; i++) bits[i] = roundBitsToHalf(bits[i], dtype);
  return tensorFromFloat32(values, t.shape);
}
