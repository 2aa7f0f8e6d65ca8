import { checkBooleanOptions, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { tidy } from '../scope.js';
import { Tensor } from '../tensor.js';
import { div, mul, sub } from './arithmetic.js';
import { normaliseAxes } from './broadcast.js';
import { mean, type ReduceDims, reduceOptions, sum } from './reduce.js';

/**
 * The index of the maximum (torch.argmax) over `dim`, or over the flattened tensor without one; int32
 * (torch's int64), no gradient. The first of tied maxima, and a NaN counts as the maximum, as torch.
 */
export function argmax(x: Tensor, dim?: number, keepdim = false): Tensor {
  return argExtreme(x, dim, keepdim, 'argmax');
}

/** The index of the minimum (torch.argmin): as argmax. */
export function argmin(x: Tensor, dim?: number, keepdim = false): Tensor {
  return argExtreme(x, dim, keepdim, 'argmin');
}

function argExtreme(x: Tensor, dim: number | undefined, keepdim: boolean, which: 'argmax' | 'argmin'): Tensor {
  checkBooleanOptions(which, { keepdim }, ['keepdim'], argumentError);
  if (x.dtype === 'bool') throw new AutogradArgumentError(`${which}: not defined for a bool tensor (as in torch)`);
  const flat = dim === undefined;
  const axis = flat ? 0 : (normaliseAxes(dim, x.rank, which)[0] ?? 0);
  if ((flat ? x.size : (x.shape[axis] ?? 1)) === 0)
    throw new AutogradArgumentError(`${which}: dim ${axis} of [${x.shape}] is empty`);
  const data = flat || x.rank === 0 ? tf.reshape(x.data, [-1]) : x.data;
  const found = tf.tidy(() => {
    const nan = tf.isNaN(tf.cast(data, 'float32'));
    // tfjs's ArgMax skips a NaN; torch's treats it as the extreme: the first NaN, where a slice has one
    const index = which === 'argmax' ? tf.argMax(data, axis) : tf.argMin(data, axis);
    const i = tf.where(tf.any(nan, axis), tf.argMax(tf.cast(nan, 'int32'), axis), index);
    if (!keepdim) return i;
    // keepdim keeps the input's rank: 1 per dim without a dim, [] for a 0-d input
    return flat || x.rank === 0
      ? tf.reshape(
          i,
          x.shape.map(() => 1),
        )
      : tf.expandDims(i, axis);
  });
  if (data !== x.data) data.dispose();
  return new Tensor(found);
}

/** var/std options: dims as a reduction's, and Bessel's `correction` (default 1) or torch 1.13's `unbiased`. */
export type VarOptions = { dim?: number | number[]; keepdim?: boolean; correction?: number; unbiased?: boolean };

/** torch.var's arguments: (unbiased), (dim, unbiased?, keepdim?) or the options. */
function varArguments(
  where: string,
  dims: ReduceDims | VarOptions | boolean,
  unbiased: boolean | undefined,
  keepdim: boolean | undefined,
): { dim?: number | number[]; keepdim: boolean; correction: number } {
  if (typeof dims === 'boolean') {
    if (unbiased !== undefined || keepdim !== undefined)
      throw new AutogradArgumentError(`${where}(unbiased) takes nothing after it; give a dim first`);
    return { keepdim: false, correction: dims ? 1 : 0 };
  }
  if (typeof dims === 'number' || Array.isArray(dims)) {
    // torch's second positional argument is unbiased (read as keepdim, var(1, false) was Bessel-corrected)
    checkBooleanOptions(where, { unbiased, keepdim }, ['unbiased', 'keepdim'], argumentError);
    return { dim: dims, keepdim: keepdim ?? false, correction: (unbiased ?? true) ? 1 : 0 };
  }
  if (unbiased !== undefined || keepdim !== undefined)
    throw new AutogradArgumentError(`${where}: unbiased and keepdim go inside the options or after a dim`);
  const { correction, unbiased: flag, ...reduce } = dims as VarOptions;
  checkOptions(where, dims, ['dim', 'keepdim', 'correction', 'unbiased'], ['keepdim', 'unbiased']);
  if (correction !== undefined && flag !== undefined)
    throw new AutogradArgumentError(`${where}: give correction or unbiased, not both`);
  const c = correction ?? (flag === false ? 0 : 1);
  if (typeof c !== 'number' || !(c >= 0))
    throw new AutogradArgumentError(`${where}: correction must be a number >= 0, got ${String(c)}`);
  const opts = reduceOptions(where, reduce, undefined);
  return { dim: opts.dim, keepdim: opts.keepdim ?? false, correction: c };
}

/**
 * Variance over dims (all by default) with Bessel's correction (torch.var: N − 1, or N with `unbiased`
 * false / `correction: 0`): sum((x − mean)²) / (N − correction), through autograd's ops, so its gradient
 * is torch's. torch's forms: `var(x)`, `var(x, false)`, `var(x, 1, false, true)` (dim, unbiased, keepdim),
 * or `var(x, { dim, keepdim, correction })`.
 */
export function variance(
  x: Tensor,
  dims: ReduceDims | VarOptions | boolean = {},
  unbiased?: boolean,
  keepdim?: boolean,
): Tensor {
  const args = varArguments('var', dims, unbiased, keepdim);
  if (x.dtype !== 'float32') throw new AutogradArgumentError(`var: needs a float32 tensor, got ${x.dtype} (as torch)`);
  const axes = normaliseAxes(args.dim, x.rank, 'var');
  const n = axes.reduce((count, a) => count * x.shape[a], 1);
  // a composite: its intermediates freed here, as mse's (the graph keeps what backward needs)
  return tidy(() => {
    // the corrected two-pass form: the float32 mean is off by up to half its ulp, which the squares
    // gained (2.8e-3 off for 1e4 ± 1e-2, torch's 3e-8; probe DC); x − mean is exact near the mean
    // (Sterbenz), and its own mean is that error
    const firstPass = sub(x, mean(x, { dim: axes, keepdim: true }));
    const centred = sub(firstPass, mean(firstPass, { dim: axes, keepdim: true }));
    // N − correction ≤ 0 divides by 0 or less: inf or NaN, as torch (with its warning)
    return div(sum(mul(centred, centred), { dim: axes, keepdim: args.keepdim }), Math.max(0, n - args.correction));
  });
}

/** √v whose gradient is 0 where v is 0 (torch's std_backward masks it there; sqrt's own is ∞ · 0 = NaN). */
class StdFromVariance extends AutogradFunction {
  forward(ctx: Context, v: tf.Tensor): tf.Tensor {
    const s = tf.sqrt(v);
    ctx.saveForBackward(s);
    return s;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [s] = ctx.savedTensors as [tf.Tensor];
    return tf.where(tf.equal(s, 0), tf.zerosLike(dy), tf.div(dy, tf.mul(s, 2)));
  }
}

/** Standard deviation: the square root of `variance`, with the same arguments (torch.std). */
export function std(
  x: Tensor,
  dims: ReduceDims | VarOptions | boolean = {},
  unbiased?: boolean,
  keepdim?: boolean,
): Tensor {
  // named for the error messages
  const args = varArguments('std', dims, unbiased, keepdim);
  return tidy(() =>
    StdFromVariance.apply<Tensor>(variance(x, { dim: args.dim, keepdim: args.keepdim, correction: args.correction })),
  );
}
