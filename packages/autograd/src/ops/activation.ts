import { tf } from '@ddp/tensor';
import type { Tensor } from '../tensor.js';
import { unary } from './unary.js';

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const INV_SQRT_2 = Math.SQRT1_2;
const GELU_TANH_C = 0.044715;

/** tanh */
export const tanh = unary('Tanh', tf.tanh, (y) => tf.sub(1, tf.square(y)), 'y');
/** logistic sigmoid */
export const sigmoid = unary('Sigmoid', tf.sigmoid, (y) => tf.mul(y, tf.sub(1, y)), 'y');
/**
 * max(x, 0); gradient 0 at 0 like PyTorch. tf.step is one pass (greater + cast took 5× as
 * long on wasm); a NaN input gets a NaN gradient.
 */
export const relu = unary('Relu', tf.relu, (x) => tf.step(x, 0), 'x');
/** log(sigmoid(x)), computed stably as -softplus(-x) */
export const logSigmoid = unary('LogSigmoid', (x) => tf.neg(tf.softplus(tf.neg(x))), (x) => tf.sigmoid(tf.neg(x)), 'x');

const geluErf = unary(
  'GeluErf',
  (x) => tf.mul(tf.mul(x, 0.5), tf.add(1, tf.erf(tf.mul(x, INV_SQRT_2)))),
  // Phi(x) + x phi(x)
  (x) => {
    const cdf = tf.mul(0.5, tf.add(1, tf.erf(tf.mul(x, INV_SQRT_2))));
    const pdf = tf.mul(tf.exp(tf.mul(tf.square(x), -0.5)), 1 / Math.sqrt(2 * Math.PI));
    return tf.add(cdf, tf.mul(x, pdf));
  },
  'x',
);

const geluTanh = unary(
  'GeluTanh',
  (x) => tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(tf.mul(SQRT_2_OVER_PI, tf.add(x, tf.mul(GELU_TANH_C, tf.pow(x, 3))))))),
  (x) => {
    const inner = tf.mul(SQRT_2_OVER_PI, tf.add(x, tf.mul(GELU_TANH_C, tf.pow(x, 3))));
    const t = tf.tanh(inner);
    const dInner = tf.mul(SQRT_2_OVER_PI, tf.add(1, tf.mul(3 * GELU_TANH_C, tf.square(x))));
    return tf.add(tf.mul(0.5, tf.add(1, t)), tf.mul(tf.mul(tf.mul(0.5, x), tf.sub(1, tf.square(t))), dInner));
  },
  'x',
);

/** GELU, exact erf form by default; approximate: 'tanh' as in torch.nn.functional.gelu. */
export function gelu(x: Tensor, opts: { approximate?: 'none' | 'tanh' } = {}): Tensor {
  return opts.approximate === 'tanh' ? geluTanh(x) : geluErf(x);
}
