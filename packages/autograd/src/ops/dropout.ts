import { checkNumberOptions, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { nextSeed } from '../random.js';
import type { Tensor } from '../tensor.js';
import { mul } from './arithmetic.js';
import { requireFloat32 } from './promotion.js';

class Dropout extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor, p: number, seed: number): tf.Tensor {
    const keep = tf.cast(tf.greaterEqual(tf.randomUniform(x.shape, 0, 1, 'float32', seed), p), 'float32');
    const mask = tf.div(keep, 1 - p);
    ctx.saveForBackward(mask);
    return tf.mul(x, mask);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    return [tf.mul(dy, ctx.savedTensors[0]), null, null];
  }
}

/**
 * F.dropout: zeroes each element with probability p and scales the rest by 1/(1-p) when
 * training; identity otherwise. `seed` fixes the mask; without it the mask comes from manualSeed's stream.
 */
export function dropout(x: Tensor, p = 0.5, opts: { training?: boolean; seed?: number } = {}): Tensor {
  checkOptions('dropout', opts, ['training', 'seed'], ['training']);
  requireFloat32('dropout', x);
  checkNumberOptions('dropout', { p, ...opts }, ['p', 'seed'], argumentError); // '0.5' passed the range check
  if (!(p >= 0 && p <= 1)) throw new AutogradArgumentError(`dropout probability must be in [0, 1], got ${p}`);
  if (opts.training === false || p === 0) return mul(x, 1);
  if (p === 1) return mul(x, 0); // torch: every element dropped, no 1/(1 − p) scale to divide by
  return Dropout.apply(x, p, opts.seed ?? nextSeed());
}
