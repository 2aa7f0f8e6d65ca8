import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';

/**
 * Elementwise op y = f(x) whose gradient is dy * f'(x). `saves` says whether f' is computed
 * from x or from y, and `derivative` receives that one (only it is kept for backward).
 * `integers`: 'float' for a function of real values (exp, log, tanh…), whose int or bool input is
 * taken as float32 as torch promotes it (tfjs raised a dtype error); 'keep' for one that keeps
 * the dtype (neg, abs, square), which a bool input is refused for, as torch does (tfjs returned
 * uninitialised bytes and only printed a warning).
 */
export function unary(
  name: string,
  f: (x: tf.Tensor) => tf.Tensor,
  derivative: (saved: tf.Tensor) => tf.Tensor,
  saves: 'x' | 'y' | 'none',
  integers: 'float' | 'keep',
): (x: Tensor) => Tensor {
  class Unary extends AutogradFunction {
    forward(ctx: Context, input: tf.Tensor): tf.Tensor {
      if (integers === 'keep' && input.dtype === 'bool')
        throw new AutogradArgumentError(`${name.toLowerCase()}: not defined for a bool tensor (as in torch)`);
      const x = integers === 'float' && input.dtype !== 'float32' ? tf.cast(input, 'float32') : input;
      const y = f(x);
      if (saves === 'x') ctx.saveForBackward(x);
      else if (saves === 'y') ctx.saveForBackward(y);
      return y;
    }
    backward(ctx: Context, dy: tf.Tensor): tf.Tensor {
      return tf.mul(dy, derivative(ctx.savedTensors[0] ?? dy));
    }
  }
  Object.defineProperty(Unary, 'name', { value: name });
  return (x: Tensor) => Unary.apply(x);
}

/** -x */
export const neg = unary('Neg', tf.neg, (dy) => tf.fill(dy.shape, -1), 'none', 'keep');
/** e^x */
export const exp = unary('Exp', tf.exp, (y) => y, 'y', 'float');
/** natural log */
export const log = unary('Log', tf.log, (x) => tf.reciprocal(x), 'x', 'float');
/** square root */
export const sqrt = unary('Sqrt', tf.sqrt, (y) => tf.div(0.5, y), 'y', 'float');
/** x * x */
export const square = unary('Square', tf.square, (x) => tf.mul(2, x), 'x', 'keep');
/** |x| (gradient 0 at 0, like PyTorch) */
export const abs = unary('Abs', tf.abs, (x) => tf.sign(x), 'x', 'keep');
