import { checkNumberOptions, layerNorm as fusedLayerNorm, layerNormGrad, moments, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { broadcastTo, normaliseAxes, reshapeTo } from './broadcast.js';
import { requireFloat32 } from './promotion.js';
import { alongDim } from './shape.js';

/**
 * Layer norm over the trailing `normalizedDims` dims with optional affine weight and bias: one
 * node over @ddp/tensor's fused layerNorm / layerNormGrad, the trailing dims flattened into one
 * row (missing weight and bias as ones and zeros). Saves x and the per-row mean and rstd.
 */
class LayerNorm extends AutogradFunction {
  private rowShape: number[] = [];
  private weightShape: number[] = [];
  forward(
    ctx: Context,
    x: tf.Tensor,
    w: tf.Tensor | null,
    b: tf.Tensor | null,
    normalizedDims: number,
    eps: number,
  ): tf.Tensor {
    if (!(Number.isInteger(normalizedDims) && normalizedDims >= 1 && normalizedDims <= x.rank)) {
      throw new AutogradArgumentError(`layerNorm: cannot normalise the last ${normalizedDims} dims of x [${x.shape}]`);
    }
    const trailing = x.shape.slice(x.rank - normalizedDims);
    for (const [name, t] of [
      ['weight', w],
      ['bias', b],
    ] as const) {
      if (t && !tf.util.arraysEqual(t.shape, trailing)) {
        throw new AutogradArgumentError(
          `layerNorm: ${name} [${t.shape}] must match the normalised dims [${trailing}] of x [${x.shape}]`,
        );
      }
    }
    const width = trailing.reduce((n, d) => n * d, 1);
    this.rowShape = [...x.shape.slice(0, x.rank - normalizedDims), width];
    this.weightShape = trailing;
    const rows = reshapeTo(x, this.rowShape);
    const gamma = w ? reshapeTo(w, [width]) : tf.ones([width]);
    const beta = b ? reshapeTo(b, [width]) : tf.zeros([width]);
    const { y, mean, rstd } = fusedLayerNorm(rows, gamma, beta, eps);
    ctx.saveForBackward(rows, gamma);
    ctx.keepForBackward(mean, rstd);
    return reshapeTo(y, x.shape);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [rows, gamma, mean, rstd] = ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor];
    const { dx, dgamma, dbeta } = layerNormGrad(reshapeTo(dy, this.rowShape), rows, mean, rstd, gamma);
    return [
      reshapeTo(dx, dy.shape),
      ctx.needsInputGrad[1] ? reshapeTo(dgamma, this.weightShape) : null,
      ctx.needsInputGrad[2] ? reshapeTo(dbeta, this.weightShape) : null,
      null,
      null,
    ];
  }
}

/** Biased mean and variance over dims (two outputs), the statistics of batch norm. */
class BatchNormStats extends AutogradFunction {
  private axes: number[] = [];
  private count = 1;
  forward(ctx: Context, x: tf.Tensor, dim: number[]): tf.Tensor[] {
    this.axes = normaliseAxes(dim, x.rank, 'batchNormStats');
    this.count = this.axes.reduce((n, a) => n * x.shape[a], 1);
    const { mean, variance } = moments(x, this.axes, true);
    ctx.keepForBackward(tf.sub(x, mean));
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
    return [broadcastTo(dx, centered.shape), null];
  }
}

/** Unit L2 norm along dim: x / max(||x||, eps) (F.normalize). */
class L2Normalize extends AutogradFunction {
  private dim = -1;
  forward(ctx: Context, x: tf.Tensor, dim: number, eps: number): tf.Tensor {
    this.dim = dim;
    const norm = tf.sqrt(tf.sum(tf.square(x), this.dim, true));
    const denom = tf.maximum(norm, eps);
    const y = tf.div(x, denom);
    ctx.saveForBackward(y);
    // at norm == eps torch's clamp_min passes the gradient through: the unclamped formula
    ctx.keepForBackward(denom, tf.cast(tf.greaterEqual(norm, eps), 'float32'));
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
  checkOptions('layerNorm', opts, ['eps', 'normalizedDims']);
  checkNumberOptions('layerNorm', opts, ['eps', 'normalizedDims'], argumentError);
  requireFloat32('layerNorm', x, weight, bias);
  const dims = opts.normalizedDims ?? weight?.rank ?? 1;
  return LayerNorm.apply(x, weight, bias, dims, opts.eps ?? 1e-5);
}

/** Batch statistics { mean, var } (biased) over dims, e.g. [0, 2, 3] for NCHW; both differentiable. */
export function batchNormStats(x: Tensor, dim: number[]): { mean: Tensor; var: Tensor } {
  requireFloat32('batchNormStats', x);
  const dims = normaliseAxes(dim, x.rank, 'batchNormStats');
  const [mean, variance] = BatchNormStats.apply<Tensor[]>(x, dims) as [Tensor, Tensor];
  return { mean, var: variance };
}

/** x / max(||x||_2, eps) along dim (F.normalize with p = 2). */
export const l2Normalize = (x: Tensor, dim = -1, eps = 1e-12): Tensor => {
  requireFloat32('l2Normalize', x);
  return alongDim(x, dim, 'l2Normalize', (v, d) => L2Normalize.apply(v, d, eps));
};
