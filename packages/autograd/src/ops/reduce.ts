import { checkBooleanOptions, sumInDouble, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { broadcastTo, keptShape, normaliseAxes } from './broadcast.js';

/** Reduction options: which dims (default all; negative counts from the end) and keepdim. */
export interface ReduceOptions {
  dim?: number | number[];
  keepdim?: boolean;
}

/** What a reduction takes after its input: options, or torch's positional dims (then keepdim). */
export type ReduceDims = ReduceOptions | number | number[];

/**
 * torch sums int32 into int64; tfjs's int32 total wrapped (3 × 2^30 gave −2^30). With no int64
 * here, a total out of int32's range is refused, found exactly (in double).
 */
function refuseInt32Overflow(x: tf.Tensor, axes: readonly number[]): void {
  const totals = sumInDouble(x.dataSync() as Int32Array, x.shape, axes);
  const over = totals.find((t) => t < -(2 ** 31) || t > 2 ** 31 - 1);
  if (over !== undefined)
    throw new AutogradArgumentError(
      `sum: the int32 total ${over} does not fit int32 (torch would give int64); sum a float32 copy instead`,
    );
}

/** Sum or mean over dims: the gradient broadcasts dy back (divided by the count for a mean). */
class SumOrMean extends AutogradFunction {
  private inShape: number[] = [];
  private axes: number[] = [];
  private divisor = 1;
  forward(_ctx: Context, x: tf.Tensor, opts: ReduceOptions, isMean: boolean): tf.Tensor {
    this.inShape = x.shape;
    this.axes = normaliseAxes(opts.dim, x.rank, isMean ? 'mean' : 'sum');
    this.divisor = isMean ? this.axes.reduce((n, a) => n * x.shape[a], 1) : 1;
    if (!isMean && x.dtype === 'int32') refuseInt32Overflow(x, this.axes);
    return (isMean ? tf.mean : tf.sum)(x, this.axes, opts.keepdim ?? false);
  }
  backward(_ctx: Context, dy: tf.Tensor) {
    return [
      tf.div(broadcastTo(tf.reshape(dy, keptShape(this.inShape, this.axes)), this.inShape), this.divisor),
      null,
      null,
    ];
  }
}

/**
 * Max or min over dims. Over one dim given as a number (torch's `x.max(dim)`) the gradient goes to
 * the first extreme along it, as torch.max(x, dim)'s values; over every dim or a list of dims it is
 * split evenly between tied extremes, as torch.amax's (and torch.max(x)'s). One rule for both gave a
 * torch user's `x.max(1)` after a ReLU (many tied zeros) other gradients, silently (probe AH).
 */
class Extreme extends AutogradFunction {
  private axes: number[] = [];
  private firstOnly = false;
  forward(ctx: Context, x: tf.Tensor, opts: ReduceOptions, which: 'max' | 'min'): tf.Tensor {
    this.axes = normaliseAxes(opts.dim, x.rank, which);
    const empty = this.axes.find((a) => x.shape[a] === 0);
    if (empty !== undefined) {
      // torch.amax raises too: −∞ would pass for a maximum, and its gradient has nowhere to go
      throw new AutogradArgumentError(`${which}: dim ${empty} of [${x.shape}] is empty, so it has no ${which}imum`);
    }
    const kept = which === 'max' ? tf.max(x, this.axes, true) : tf.min(x, this.axes, true);
    // a 0-d tensor has no dim to run along: it is its own extreme (tf.cumsum of it hung on wasm; probe AS)
    this.firstOnly = typeof opts.dim === 'number' && this.axes.length > 0;
    // torch.max(x, dim) and torch.max(x) pick a NaN as the extreme and give it the gradient (torch.amax over
    // a list of dims gives NaN everywhere); NaN equals nothing, not even kept (probe BV: max(x) gave all NaN)
    const equal = tf.equal(x, kept);
    const nanWins = this.firstOnly || opts.dim === undefined;
    const tie = nanWins ? tf.logicalOr(equal, tf.logicalAnd(tf.isNaN(x), tf.isNaN(kept))) : equal;
    const ties = tf.cast(tie, 'float32');
    // the first of the ties: where the running count of ties along the dim reaches one
    const axis = this.axes[0];
    const mask = this.firstOnly ? tf.mul(ties, tf.cast(tf.equal(tf.cumsum(ties, axis), 1), 'float32')) : ties;
    ctx.saveForBackward(mask);
    return opts.keepdim ? kept : tf.squeeze(kept, this.axes);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [mask] = ctx.savedTensors as [tf.Tensor];
    const dyKept = tf.reshape(dy, keptShape(mask.shape, this.axes));
    const spread = tf.mul(mask, dyKept);
    return [this.firstOnly ? spread : tf.div(spread, tf.sum(mask, this.axes, true)), null, null];
  }
}

/** Sum over dims (all by default): `sum(x, { dim: 1, keepdim: true })` or torch's `sum(x, 1, true)`. */
export const sum = (x: Tensor, dims: ReduceDims = {}, keepdim?: boolean): Tensor =>
  SumOrMean.apply(x, reduceOptions('sum', dims, keepdim), false);
/** Mean over dims (all by default). */
export const mean = (x: Tensor, dims: ReduceDims = {}, keepdim?: boolean): Tensor =>
  SumOrMean.apply(x, reduceOptions('mean', dims, keepdim), true);
/** Maximum over dims: torch.max(x, dim)'s values over one dim given as a number, else torch.amax (no indices). */
export const max = (x: Tensor, dims: ReduceDims = {}, keepdim?: boolean): Tensor =>
  Extreme.apply(x, reduceOptions('max', dims, keepdim), 'max');
/** Minimum over dims: torch.min(x, dim)'s values over one dim given as a number, else torch.amin. */
export const min = (x: Tensor, dims: ReduceDims = {}, keepdim?: boolean): Tensor =>
  Extreme.apply(x, reduceOptions('min', dims, keepdim), 'min');

/**
 * The options of a reduction given either way. torch's `x.sum(1)` was read as options and
 * ignored (a number has no keys): the sum of every element, silently.
 */
export function reduceOptions(where: string, dims: ReduceDims, keepdim: boolean | undefined): ReduceOptions {
  if (typeof dims === 'number' || Array.isArray(dims)) {
    checkBooleanOptions(where, { keepdim }, ['keepdim'], argumentError);
    return { dim: dims, keepdim: keepdim ?? false };
  }
  if (typeof dims !== 'object' || dims === null)
    throw new AutogradArgumentError(
      `${where}: dims must be a number, an array or { dim, keepdim }, got ${String(dims)}`,
    );
  if (keepdim !== undefined)
    throw new AutogradArgumentError(
      `${where}: keepdim goes inside the options ({ dim, keepdim }) or after a dim number`,
    );
  checkOptions(where, dims, ['dim', 'keepdim'], ['keepdim']);
  return dims;
}
