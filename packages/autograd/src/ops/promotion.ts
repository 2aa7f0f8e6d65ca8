import { tf } from '@ddp/tensor';
import { AutogradArgumentError, refusePromises } from '../errors.js';

/** An operand of an elementwise op: a tensor or a plain number. */
type Raw = tf.Tensor | number;

/**
 * torch's type promotion over the operands of an elementwise op: float32 when any tensor is
 * float32 or any number has a fraction; else int32 (bool counts as an integer; an integer
 * number keeps an int32 tensor int32, as `ids + 1` in torch). `trueDivision`: `/` of integers
 * is float32, as torch's true division. tfjs promoted `int32 + 1` to float32 (16777217 + 0 was
 * 16777216) and divided int32 by int32 with floor.
 */
export function promotedDtype(operands: readonly Raw[], trueDivision = false): 'float32' | 'int32' {
  const float = operands.some((x) => (typeof x === 'number' ? !Number.isInteger(x) : x.dtype === 'float32'));
  return float || trueDivision ? 'float32' : 'int32';
}

/** Bool when every operand is a bool tensor (torch's where and cat of bools), else `promotedDtype`. */
export function promotedKeepingBool(operands: readonly Raw[]): 'float32' | 'int32' | 'bool' {
  return operands.every((x) => typeof x !== 'number' && x.dtype === 'bool') ? 'bool' : promotedDtype(operands);
}

/** `x` as a tensor of `dtype` (a number becomes a scalar; a tensor of that dtype is returned as it is). */
export function asDtype(x: Raw, dtype: 'float32' | 'int32' | 'bool'): tf.Tensor {
  if (typeof x === 'number') return tf.scalar(x, dtype);
  return x.dtype === dtype ? x : tf.cast(x, dtype);
}

/** True when every operand is float32 or a number: tfjs's own handling is already torch's. */
export const allFloat = (operands: readonly Raw[]): boolean =>
  operands.every((x) => typeof x === 'number' || x.dtype === 'float32');

/**
 * Ops defined on real values only (products, convolutions, softmax, norms, a loss's logits): an
 * int32 or bool operand was read as float32 bits (conv2d of [1, 2] gave 1.4e-45, 2.8e-45) or as
 * tfjs's uninitialised bytes, with only a console line; torch raises. `null` operands are skipped.
 */
export function requireFloat32(op: string, ...xs: ({ dtype: string } | null)[]): void {
  refusePromises(op, xs);
  const other = xs.find((x) => x !== null && x.dtype !== 'float32');
  if (other) throw new AutogradArgumentError(`${op}: operands must be float32, got ${other.dtype} (cast them first)`);
}
