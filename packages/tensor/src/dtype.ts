import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from '@ddp/half';
import * as tf from '@tensorflow/tfjs-core';

/** The element types ddp moves between tensors, files and the wire. */
export type DType = 'float32' | 'float64' | 'int32' | 'float16' | 'bfloat16';

export type TypedArray = Float32Array | Float64Array | Int32Array | Uint16Array;

export interface DTypeInfo {
  readonly name: DType;
  readonly bytesPerElement: number;
  /** The typed array that holds this dtype's raw elements (Uint16Array holds float16/bfloat16 bits). */
  readonly ArrayType:
    | Float32ArrayConstructor
    | Float64ArrayConstructor
    | Int32ArrayConstructor
    | Uint16ArrayConstructor;
  /** The tfjs dtype a tensor of this dtype computes in (tfjs has no 64- or 16-bit floats). */
  readonly tfDtype: 'float32' | 'int32';
  readonly isFloatingPoint: boolean;
}

/** Raised for an unknown dtype name or data that does not fit the shape asked for. */
export class DTypeError extends Error {
  override name = 'DTypeError';
}

export const DTYPES: Readonly<Record<DType, DTypeInfo>> = {
  float32: { name: 'float32', bytesPerElement: 4, ArrayType: Float32Array, tfDtype: 'float32', isFloatingPoint: true },
  float64: { name: 'float64', bytesPerElement: 8, ArrayType: Float64Array, tfDtype: 'float32', isFloatingPoint: true },
  int32: { name: 'int32', bytesPerElement: 4, ArrayType: Int32Array, tfDtype: 'int32', isFloatingPoint: false },
  float16: { name: 'float16', bytesPerElement: 2, ArrayType: Uint16Array, tfDtype: 'float32', isFloatingPoint: true },
  bfloat16: { name: 'bfloat16', bytesPerElement: 2, ArrayType: Uint16Array, tfDtype: 'float32', isFloatingPoint: true },
};

export function isDType(name: string): name is DType {
  return Object.hasOwn(DTYPES, name);
}

export function dtypeInfo(name: string): DTypeInfo {
  if (!isDType(name))
    throw new DTypeError(`unknown dtype '${name}' (expected one of ${Object.keys(DTYPES).join(', ')})`);
  return DTYPES[name];
}

export function bytesPerElement(name: DType): number {
  return dtypeInfo(name).bytesPerElement;
}

function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Copies a typed array into a new tensor. `dtype` says how to read `data` (needed for
 * Uint16Array, which may hold float16 or bfloat16 bits); float64/16-bit data becomes float32.
 */
export function tensorFromTypedArray(data: TypedArray, shape: readonly number[], dtype?: DType): tf.Tensor {
  const kind = dtype ?? defaultDTypeOf(data);
  const info = dtypeInfo(kind);
  if (!(data instanceof info.ArrayType)) {
    throw new DTypeError(`dtype ${kind} needs a ${info.ArrayType.name}, got ${data.constructor.name}`);
  }
  if (data.length !== sizeOf(shape)) {
    throw new DTypeError(`${data.length} elements do not fill shape [${shape.join(', ')}]`);
  }
  const values =
    kind === 'float16'
      ? decodeFloat16(data as Uint16Array)
      : kind === 'bfloat16'
        ? decodeBfloat16(data as Uint16Array)
        : kind === 'float64'
          ? Float32Array.from(data as Float64Array)
          : (data as Float32Array | Int32Array).slice();
  return tf.tensor(values, [...shape], info.tfDtype);
}

function defaultDTypeOf(data: TypedArray): DType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof Int32Array) return 'int32';
  throw new DTypeError('a Uint16Array is ambiguous: pass dtype float16 or bfloat16');
}

/**
 * float32 values as int32, truncated toward zero as torch's `.to(torch.int32)`; a value with no
 * int32 (NaN, ±Inf, beyond ±2^31) is refused: Int32Array wrapped it modulo 2^32 (3e9 became
 * -1294967296) and made NaN a plausible 0, where torch gives the recognisable INT_MIN.
 */
function toInt32(values: Float32Array): Int32Array {
  const out = new Int32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = Math.trunc(values[i]);
    if (!(v >= -(2 ** 31) && v < 2 ** 31)) {
      throw new DTypeError(`element ${i} is ${values[i]}, which has no int32 value`);
    }
    out[i] = v;
  }
  return out;
}

/**
 * `values` as `dtype`, always in an array of its own: what a backend's dataSync returns may be
 * the tensor's storage (the cpu backend's is).
 */
function convert(values: Float32Array | Int32Array, dtype: DType): TypedArray {
  const own = (a: Float32Array | Int32Array) => (a === values ? a.slice() : a);
  switch (dtype) {
    case 'float32':
      return own(values instanceof Float32Array ? values : Float32Array.from(values));
    case 'float64':
      return Float64Array.from(values);
    case 'int32':
      return own(values instanceof Int32Array ? values : toInt32(values));
    case 'float16':
      return encodeFloat16(values instanceof Float32Array ? values : Float32Array.from(values));
    case 'bfloat16':
      return encodeBfloat16(values instanceof Float32Array ? values : Float32Array.from(values));
  }
}

function checkReadable(t: tf.Tensor): void {
  if (t.dtype !== 'float32' && t.dtype !== 'int32' && t.dtype !== 'bool') {
    throw new DTypeError(`cannot copy a ${t.dtype} tensor into a typed array`);
  }
}

/**
 * Copies a tensor's values into a new typed array of `dtype` (default: the tensor's own); a float
 * value with no int32 raises DTypeError when `dtype` is int32.
 */
export async function tensorToTypedArray(t: tf.Tensor, dtype?: DType): Promise<TypedArray> {
  checkReadable(t);
  const values = (await t.data()) as Float32Array | Int32Array;
  return convert(values, dtype ?? (t.dtype === 'float32' ? 'float32' : 'int32'));
}

/** Synchronous form of tensorToTypedArray (blocks on the backend). */
export function tensorToTypedArraySync(t: tf.Tensor, dtype?: DType): TypedArray {
  checkReadable(t);
  const values = t.dataSync() as Float32Array | Int32Array;
  return convert(values, dtype ?? (t.dtype === 'float32' ? 'float32' : 'int32'));
}
