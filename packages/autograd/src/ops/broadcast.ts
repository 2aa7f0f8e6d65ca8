import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';

/**
 * t viewed as `shape`: t itself when it already has it (a Reshape kernel is not free: a tensor and its bookkeeping).
 */
export function reshapeTo(t: tf.Tensor, shape: readonly number[]): tf.Tensor {
  return tf.util.arraysEqual(t.shape, shape as number[]) ? t : tf.reshape(t, shape as number[]);
}

/** Sums a broadcast gradient back down to `shape` (the input's shape before broadcasting). */
export function sumToShape(grad: tf.Tensor, shape: readonly number[]): tf.Tensor {
  if (grad.shape.length === shape.length && grad.shape.every((d, i) => d === shape[i])) return grad;
  const lead = grad.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < grad.rank; i++) {
    if (i < lead || (shape[i - lead] === 1 && grad.shape[i] !== 1)) axes.push(i);
  }
  const summed = axes.length > 0 ? tf.sum(grad, axes) : grad;
  return reshapeTo(summed, shape);
}

/**
 * Normalises possibly negative axes against a rank; undefined means all axes. An axis outside
 * [-rank, rank) or given twice is refused as torch refuses it: tfjs reduced [0, 0] over every
 * dim (sum over dim [0, 0] of a [2, 2] was the sum of all four).
 */
export function normaliseAxes(axis: number | number[] | undefined, rank: number, op = 'reduction'): number[] {
  // an empty list is every dim, as torch's sum(x, []) (it returned x unreduced)
  if (axis === undefined || (Array.isArray(axis) && axis.length === 0)) return [...Array(rank).keys()];
  const span = Math.max(rank, 1); // a scalar takes dim 0 or -1, as in torch
  const list = (Array.isArray(axis) ? axis : [axis]).map((a) => {
    if (!(Number.isInteger(a) && a >= -span && a < span))
      throw new AutogradArgumentError(`${op}: dim ${a} is out of range for a tensor of rank ${rank}`);
    return a < 0 ? a + rank : a;
  });
  const twice = list.find((a, i) => list.indexOf(a) !== i);
  if (twice !== undefined) throw new AutogradArgumentError(`${op}: dim ${twice} appears more than once in [${axis}]`);
  return rank === 0 ? [] : list;
}

/** One dim of a tensor of `rank` (negative counts from the end), refused as torch refuses it when out of range. */
export const normaliseDim = (dim: number, rank: number, op: string): number => normaliseAxes(dim, rank, op)[0] ?? 0;

/** The shape a reduction over axes would have with keepdim, to broadcast grads back. */
export function keptShape(shape: readonly number[], axes: number[]): number[] {
  return shape.map((d, i) => (axes.includes(i) ? 1 : d));
}

/**
 * The shape a and b broadcast to (numpy rules), or an AutogradArgumentError naming `op` and
 * both shapes: plain shape arithmetic, checked before tfjs sees the operands.
 */
export function broadcastShapes(op: string, a: readonly number[], b: readonly number[]): number[] {
  const rank = Math.max(a.length, b.length);
  const out = Array<number>(rank);
  for (let i = 1; i <= rank; i++) {
    const da = a[a.length - i] ?? 1;
    const db = b[b.length - i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new AutogradArgumentError(
        `${op}: shapes [${a}] and [${b}] cannot be broadcast together (dim ${-i}: ${da} vs ${db})`,
      );
    }
    out[rank - i] = da === 1 ? db : da;
  }
  return out;
}

/**
 * tf.broadcastTo that also broadcasts a size-1 dim to size 0: tfjs returned its input unchanged
 * when no dim grew past 1 (a gradient [1, 3] for a leaf [0, 3], or uninitialised memory in where).
 */
export function broadcastTo(t: tf.Tensor, shape: number[]): tf.Tensor {
  return shape.includes(0) ? tf.zeros(shape, t.dtype) : tf.broadcastTo(t, shape);
}
