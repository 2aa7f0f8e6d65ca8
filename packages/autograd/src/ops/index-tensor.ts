import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { Tensor } from '../tensor.js';

/** Integer indices: a plain list, an int32 tf.Tensor or an int32 Tensor. */
export type Indices = number[] | number[][] | tf.Tensor | Tensor;

/** int32's range: an index outside it would wrap in the cast (2^32 + 1 to row 1) and pass every later check. */
const INT32_MIN = -(2 ** 31);
const INT32_LIMIT = 2 ** 31;

/**
 * Indices as an int32 tensor. A fractional value is refused: the cast would truncate 1.5 to 1 and
 * pick a row or class nobody asked for, silently (torch refuses non-integer indices too); so is
 * one beyond int32, which the cast would wrap onto a valid row, class or ignoreIndex.
 */
export function toIndexTensor(idx: Indices, op: string): tf.Tensor {
  const given = idx instanceof Tensor ? idx.data : idx instanceof tf.Tensor ? idx : null;
  // a bool mask is not indices (torch refuses it): it was read as rows 0 and 1
  if (given?.dtype === 'bool')
    throw new AutogradArgumentError(`${op}: indices must be integers, got a bool tensor (a mask?)`);
  if (given === null && !Array.isArray(idx)) {
    const kind = (idx as object)?.constructor?.name ?? typeof idx;
    throw new AutogradArgumentError(`${op}: indices must be a list, an int32 tf.Tensor or a Tensor, got ${kind}`);
  }
  if (given === null) checkRectangular(idx as unknown[], op);
  const values =
    given === null
      ? ((idx as unknown[]).flat(Number.POSITIVE_INFINITY) as number[])
      : given.dtype === 'int32'
        ? []
        : given.dataSync();
  for (const v of values) {
    if (!Number.isInteger(v)) throw new AutogradArgumentError(`${op}: index ${v} is not an integer`);
    if (v < INT32_MIN || v >= INT32_LIMIT) throw new AutogradArgumentError(`${op}: index ${v} is out of range`);
  }
  return given === null ? tf.tensor(idx as number[], undefined, 'int32') : tf.cast(given, 'int32');
}

/**
 * Refuses a ragged list of ids ([[0, 1], [2]]: a RangeError from inside tfjs), naming where its rows
 * differ; lists of any depth are fine (torch takes ids of any shape).
 */
function checkRectangular(list: unknown[], op: string, at = 'ids'): void {
  const lengths = list.map((row) => (Array.isArray(row) ? row.length : -1));
  if (new Set(lengths).size > 1)
    throw new AutogradArgumentError(
      `${op}: ${at} is ragged: its entries have different lengths (${lengths.join(', ')})`,
    );
  list.forEach((row, i) => {
    if (Array.isArray(row)) checkRectangular(row, op, `${at}[${i}]`);
  });
}
