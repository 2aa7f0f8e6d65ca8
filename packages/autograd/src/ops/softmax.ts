import { softmax as fusedSoftmax, softmaxGrad, tf } from '@ddp/tensor';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { tidy } from '../scope.js';
import { Tensor } from '../tensor.js';
import { add, sub } from './arithmetic.js';
import { normaliseAxes } from './broadcast.js';
import { requireFloat32 } from './promotion.js';
import { sum } from './reduce.js';
import { alongDim } from './shape.js';
import { exp, log } from './unary.js';

/** Numerically stable log-softmax over one dim. */
export function logSoftmaxKernel(x: tf.Tensor, dim: number): tf.Tensor {
  const shifted = tf.sub(x, tf.max(x, dim, true));
  return tf.sub(shifted, tf.log(tf.sum(tf.exp(shifted), dim, true)));
}

/**
 * Softmax over one dim. Over the last dim (attention): @ddp/tensor's fused softmax and
 * softmaxGrad; over another, the stable composite. Saves y.
 */
class Softmax extends AutogradFunction {
  private dim = -1;
  private last = true;
  forward(ctx: Context, x: tf.Tensor, dim: number): tf.Tensor {
    this.dim = dim;
    this.last = this.dim === x.rank - 1;
    const y = this.last ? fusedSoftmax(x) : tf.exp(logSoftmaxKernel(x, this.dim));
    ctx.saveForBackward(y);
    return y;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [y] = ctx.savedTensors as [tf.Tensor];
    if (this.last) return [softmaxGrad(dy, y), null];
    // dx = y * (dy - sum(dy * y))
    return [tf.mul(y, tf.sub(dy, tf.sum(tf.mul(dy, y), this.dim, true))), null];
  }
}

class LogSoftmax extends AutogradFunction {
  private dim = -1;
  forward(ctx: Context, x: tf.Tensor, dim: number): tf.Tensor {
    this.dim = dim;
    const y = logSoftmaxKernel(x, this.dim);
    ctx.saveForBackward(y);
    return y;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [y] = ctx.savedTensors as [tf.Tensor];
    // dx = dy - softmax * sum(dy)
    return [tf.sub(dy, tf.mul(tf.exp(y), tf.sum(dy, this.dim, true))), null];
  }
}

/** softmax over `dim` (default last). */
export const softmax = (x: Tensor, dim = -1): Tensor => {
  requireFloat32('softmax', x);
  return alongDim(x, dim, 'softmax', (v, d) => Softmax.apply(v, d));
};
/** log(softmax(x)) over `dim` (default last), computed stably. */
export const logSoftmax = (x: Tensor, dim = -1): Tensor => {
  requireFloat32('logSoftmax', x);
  return alongDim(x, dim, 'logSoftmax', (v, d) => LogSoftmax.apply(v, d));
};

/**
 * log(sum(exp(x))) over `dim` (torch.logsumexp), shifted by the (detached) maximum so that large values do
 * not overflow; a maximum of ±inf is not subtracted (inf − inf would be NaN). Its gradient is softmax's.
 */
export function logsumexp(x: Tensor, dim: number | number[], keepdim = false): Tensor {
  requireFloat32('logsumexp', x);
  const axes = normaliseAxes(dim, x.rank, 'logsumexp');
  const shift = new Tensor(
    tf.tidy(() => {
      const m = tf.max(x.data, axes, true);
      return tf.where(tf.isInf(m), tf.zerosLike(m), m);
    }),
  );
  try {
    return tidy(() => {
      const total = log(sum(exp(sub(x, shift)), { dim: axes, keepdim: true }));
      return sum(add(total, shift), { dim: axes, keepdim }); // the sum over size-1 dims drops them
    });
  } finally {
    shift.dispose();
  }
}
