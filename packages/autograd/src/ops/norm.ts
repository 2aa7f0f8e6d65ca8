import { tf } from '@ddp/tensor';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { normaliseAxes } from './broadcast.js';

const trailingAxes = (rank: number, count: number) => [...Array(count).keys()].map((i) => rank - count + i);

/** Layer norm over the trailing `normalizedDims` dims with optional affine weight and bias. */
class LayerNorm extends AutogradFunction {
  private axes: number[] = [];
  private outer: number[] = [];
  forward(ctx: Context, x: tf.Tensor, w: tf.Tensor | null, b: tf.Tensor | null, normalizedDims: number, eps: number): tf.Tensor {
    this.axes = trailingAxes(x.rank, normalizedDims);
    this.outer = [...Array(x.rank - normalizedDims).keys()];
    const { mean, variance } = tf.moments(x, this.axes, true);
    const rstd = tf.rsqrt(tf.add(variance, eps));
    const xhat = tf.mul(tf.sub(x, mean), rstd);
    ctx.saveForBackward(xhat, rstd, w ?? tf.scalar(1));
    let y = w ? tf.mul(xhat, w) : xhat;
    if (b) y = tf.add(y, b);
    return y;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [xhat, rstd, w] = ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor];
    const dxhat = tf.mul(dy, w);
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) over the normalised dims
    const dx = tf.mul(
      rstd,
      tf.sub(tf.sub(dxhat, tf.mean(dxhat, this.axes, true)), tf.mul(xhat, tf.mean(tf.mul(dxhat, xhat), this.axes, true))),
    );
    const dw = ctx.needsInputGrad[1] ? tf.sum(tf.mul(dy, xhat), this.outer) : null;
    const db = ctx.needsInputGrad[2] ? tf.sum(dy, this.outer) : null;
    return [dx, dw, db, null, null];
  }
}

/** Biased mean and variance over dims (two outputs), the statistics of batch norm. */
class BatchNormStats extends AutogradFunction {
  private axes: number[] = [];
  private count = 1;
  forward(ctx: Context, x: tf.Tensor, dim: number[]): tf.Tensor[] {
    this.axes = normaliseAxes(dim, x.rank);
    this.count = this.axes.reduce((n, a) => n * x.shape[a]!, 1);
    const { mean, variance } = tf.moments(x, this.axes, true);
    ctx.saveForBackward(tf.sub(x, mean));
    const outShape = x.shape.filter((_, i) => !this.axes.includes(i));
    return [tf.reshape(mean, outShape), tf.reshape(variance, outShape)];
  }
  backward(ctx: Context, dmean: tf.Tensor, dvar: tf.Tensor) {
    const [centered] = ctx.savedTensors as [tf.Tensor];
    const kept = centered.shape.map((d, i) => (this.axes.includes(i) ? 1 : d));
    const dx = tf.add(
      tf.div(tf.reshape(dmean, kept), this.count),
      tf.mul(tf.reshape(dvar, kept), tf.mul(centered, 2 / this.count)),
    );
    return [tf.broadcastTo(dx, centered.shape), null];
  }
}

/** Unit L2 norm along dim: x / max(||x||, eps) (F.normalize). */
class L2Normalize extends AutogradFunction {
  private dim = -1;
  forward(ctx: Context, x: tf.Tensor, dim: number, eps: number): tf.Tensor {
    this.dim = dim < 0 ? dim + x.rank : dim;
    const norm = tf.sqrt(tf.sum(tf.square(x), this.dim, true));
    const denom = tf.maximum(norm, eps);
    const y = tf.div(x, denom);
    ctx.saveForBackward(y, denom, tf.cast(tf.greater(norm, eps), 'float32'));
    return y;
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [y, denom, unclamped] = ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor];
    // where the norm was not clamped: (dy - y <y, dy>) / ||x||; else dy / eps
    const radial = tf.mul(unclamped, tf.mul(y, tf.sum(tf.mul(dy, y), this.dim, true)));
    return [tf.div(tf.sub(dy, radial), denom), null, null];
  }
}

/**
 * F.layer_norm over the trailing dims of weight's rank (or `normalizedDims`, default 1).
 */
export function layerNorm(
  x: Tensor,
  weight: Tensor | null = null,
  bias: Tensor | null = null,
  opts: { eps?: number; normalizedDims?: number } = {},
): Tensor {
  const dims = opts.normalizedDims ?? weight?.rank ?? 1;
  return LayerNorm.apply(x, weight, bias, dims, opts.eps ?? 1e-5);
}

/** Batch statistics { mean, var } (biased) over dims, e.g. [0, 2, 3] for NCHW; both differentiable. */
export function batchNormStats(x: Tensor, dim: number[]): { mean: Tensor; var: Tensor } {
  const [mean, variance] = BatchNormStats.apply<Tensor[]>(x, dim) as [Tensor, Tensor];
  return { mean, var: variance };
}

/** x / max(||x||_2, eps) along dim (F.normalize with p = 2). */
export const l2Normalize = (x: Tensor, dim = -1, eps = 1e-12): Tensor => L2Normalize.apply(x, dim, eps);
