import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from './errors.js';

/**
 * Refuses values torch cannot convert to int32 (NaN, ±∞, or out of range once truncated toward
 * zero, as torch truncates): tfjs wraps them as an Int32Array does (3e9 became −1294967296, NaN 0).
 */
export function checkInt32Values(where: string, values: tf.TensorLike | number): void {
  if (values instanceof Int32Array) return;
  const flat: ArrayLike<unknown> =
    typeof values === 'number'
      ? [values]
      : ArrayBuffer.isView(values)
        ? (values as unknown as ArrayLike<number>)
        : tf.util.flatten(values as tf.RecursiveArray<number>);
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    if (typeof v !== 'number') continue; // booleans: 0 or 1
    const t = Math.trunc(v);
    if (!(t >= -(2 ** 31) && t <= 2 ** 31 - 1))
      throw new AutogradArgumentError(`${where}: value ${v} cannot be converted to int32 without overflow`);
  }
}
