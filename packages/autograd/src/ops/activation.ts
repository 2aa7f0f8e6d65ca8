import { checkOptionValue, gelu as fusedGelu, geluGrad, reluGrad, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { requireFloat32 } from './promotion.js';
import { unary } from './unary.js';

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const GELU_TANH_C = 0.044715;

/** tanh */
export const tanh = unary('Tanh', tf.tanh, (y) => tf.sub(1, tf.square(y)), 'y', 'float');
/** logistic sigmoid */
export const sigmoid = unary('Sigmoid', tf.sigmoid, (y) => tf.mul(y, tf.sub(1, y)), 'y', 'float');
/** max(x, 0); its gradient as torch's: 0 where x <= 0, dy elsewhere, one pass (@ddp/tensor's reluGrad). */
class Relu extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor): tf.Tensor {
    ctx.saveForBackward(x);
    return tf.relu(x);
  }
  backward(ctx: Context, dy: tf.Tensor): tf.Tensor {
    return reluGrad(dy, ctx.savedTensors[0]);
  }
}
/** torch's relu keeps an int32 tensor's dtype and refuses a bool (tfjs gave uninitialised bytes). */
export const relu = (x: Tensor): Tensor => {
  if (x.dtype === 'bool') throw new AutogradArgumentError('relu: not defined for a bool tensor (as in torch)');
  return Relu.apply(x);
};
/** log(sigmoid(x)), computed stably as -softplus(-x) */
export const logSigmoid = unary(
  'LogSigmoid',
  (x) => tf.neg(tf.softplus(tf.neg(x))),
  (x) => tf.sigmoid(tf.neg(x)),
  'x',
  'float',
);

/** GELU, erf form, as one node over @ddp/tensor's gelu / geluGrad; saves x. */
class GeluErf extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor): tf.Tensor {
    ctx.saveForBackward(x);
    return fusedGelu(x);
  }
  backward(ctx: Context, dy: tf.Tensor): tf.Tensor {
    return geluGrad(dy, ctx.savedTensors[0]);
  }
}

const geluTanh = unary(
  'GeluTanh',
  (x) =>
    tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(tf.mul(SQRT_2_OVER_PI, tf.add(x, tf.mul(GELU_TANH_C, tf.pow(x, 3))))))),
  (x) => {
    const inner = tf.mul(SQRT_2_OVER_PI, tf.add(x, tf.mul(GELU_TANH_C, tf.pow(x, 3))));
    const t = tf.tanh(inner);
    const dInner = tf.mul(SQRT_2_OVER_PI, tf.add(1, tf.mul(3 * GELU_TANH_C, tf.square(x))));
    return tf.add(tf.mul(0.5, tf.add(1, t)), tf.mul(tf.mul(tf.mul(0.5, x), tf.sub(1, tf.square(t))), dInner));
  },
  'x',
  'float',
);

/** GELU, exact erf form by default; approximate: 'tanh' as in torch.nn.functional.gelu. */
export function gelu(x: Tensor, opts: { approximate?: 'none' | 'tanh' } = {}): Tensor {
  checkOptions('gelu', opts, ['approximate']);
  checkOptionValue('gelu', 'approximate', opts.approximate, ['none', 'tanh'], argumentError);
  requireFloat32('gelu', x);
  return opts.approximate === 'tanh' ? geluTanh(x) : GeluErf.apply(x);
}
