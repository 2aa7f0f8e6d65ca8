import * as tf from '@tensorflow/tfjs-core';
import { FusedOpError } from './errors.js';
import { moments } from './moments.js';
import { aroundAxis, runFused } from './native-fused.js';

/** layerNorm's outputs: y, and the per-row statistics backward needs, shaped [..., 1] as x with its last axis kept. */
export interface LayerNormResult {
  y: tf.Tensor;
  mean: tf.Tensor;
  /** 1 / √(biased variance + eps) */
  rstd: tf.Tensor;
}

/** layerNormGrad's outputs: dx shaped as x, dgamma and dbeta as gamma. */
export interface LayerNormGrads {
  dx: tf.Tensor;
  dgamma: tf.Tensor;
  dbeta: tf.Tensor;
}

const INV_SQRT_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

function lastDim(op: string, x: tf.Tensor): number {
  if (x.rank < 1) throw new FusedOpError(`${op}: x must have at least one axis, got a scalar`);
  return x.shape[x.rank - 1];
}

function expectShape(op: string, name: string, t: tf.Tensor, shape: number[]): void {
  if (!tf.util.arraysEqual(t.shape, shape)) {
    throw new FusedOpError(`${op}: ${name} has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`);
  }
}

/** x's shape with its last axis kept as 1: the shape of layer norm's mean and rstd. */
function rowShape(x: tf.Tensor): number[] {
  return [...x.shape.slice(0, -1), 1];
}

/**
 * Layer norm over the last axis (torch.native_layer_norm): y = (x − mean)·rstd·gamma + beta,
 * biased variance, gamma and beta of shape [C]. One native pass where the native kernels are on
 * (as every op below), tfjs ops otherwise.
 */
export function layerNorm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, eps: number): LayerNormResult {
  const c = lastDim('layerNorm', x);
  expectShape('layerNorm', 'gamma', gamma, [c]);
  expectShape('layerNorm', 'beta', beta, [c]);
  const native = runFused('DdpLayerNorm', [x, gamma, beta], { eps });
  if (native) return { y: native[0], mean: native[1], rstd: native[2] };
  return tf.tidy(() => {
    const { mean, variance } = moments(x, [x.rank - 1], true);
    const rstd = rowRstd(x, mean, variance, eps);
    const y = tf.add(tf.mul(tf.mul(tf.sub(x, mean), rstd), gamma), beta);
    return { y, mean, rstd };
  });
}

/**
 * 1 / √(variance + eps) per row. A row spread beyond ~1.8e19 overflows its float32 variance: rstd
 * came out 0 and y 0 (the bias) silently, where the native kernel, in double, is right (probe AW);
 * such rows are scaled by their largest deviation s first: rstd = rsqrt(var(d / s) + eps / s²) / s.
 */
function rowRstd(x: tf.Tensor, mean: tf.Tensor, variance: tf.Tensor, eps: number): tf.Tensor {
  const rstd = tf.rsqrt(tf.add(variance, eps));
  const overflowed = tf.isInf(variance);
  if (tf.any(overflowed).dataSync()[0] === 0) return rstd;
  const d = tf.sub(x, mean);
  const s = tf.maximum(tf.max(tf.abs(d), -1, true), 1);
  const scaledVariance = tf.mean(tf.square(tf.div(d, s)), -1, true);
  const scaled = tf.div(tf.rsqrt(tf.add(scaledVariance, tf.div(eps, tf.square(s)))), s);
  return tf.where(overflowed, scaled, rstd);
}

/**
 * Gradients of layerNorm given dy and its saved x, mean and rstd (torch.native_layer_norm_backward):
 * dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·gamma and x̂ = (x − mean)·rstd over the last
 * axis; dgamma = Σ dy·x̂ and dbeta = Σ dy over every other axis.
 */
export function layerNormGrad(
  dy: tf.Tensor,
  x: tf.Tensor,
  mean: tf.Tensor,
  rstd: tf.Tensor,
  gamma: tf.Tensor,
): LayerNormGrads {
  const c = lastDim('layerNormGrad', x);
  expectShape('layerNormGrad', 'dy', dy, x.shape);
  expectShape('layerNormGrad', 'mean', mean, rowShape(x));
  expectShape('layerNormGrad', 'rstd', rstd, rowShape(x));
  expectShape('layerNormGrad', 'gamma', gamma, [c]);
  const native = runFused('DdpLayerNormGrad', [dy, x, mean, rstd, gamma]);
  if (native) return { dx: native[0], dgamma: native[1], dbeta: native[2] };
  return tf.tidy(() => {
    const outer = [...Array(x.rank - 1).keys()];
    const xhat = tf.mul(tf.sub(x, mean), rstd);
    const g = tf.mul(dy, gamma);
    const dx = tf.mul(rstd, tf.sub(tf.sub(g, tf.mean(g, -1, true)), tf.mul(xhat, tf.mean(tf.mul(g, xhat), -1, true))));
    const dgamma = tf.reshape(tf.sum(tf.mul(dy, xhat), outer), [c]);
    const dbeta = tf.reshape(tf.sum(dy, outer), [c]);
    return { dx, dgamma, dbeta };
  });
}

/** GELU in its exact erf form (PyTorch's default): x·Φ(x) = x/2·(1 + erf(x/√2)). */
export function gelu(x: tf.Tensor): tf.Tensor {
  const native = runFused('DdpGelu', [x]);
  if (native) return native[0];
  return tf.tidy(() => tf.mul(tf.mul(x, 0.5), tf.add(1, tf.erf(tf.mul(x, INV_SQRT_2)))));
}

/** dy·GELU′(x) = dy·(Φ(x) + x·φ(x)), erf form. */
export function geluGrad(dy: tf.Tensor, x: tf.Tensor): tf.Tensor {
  expectShape('geluGrad', 'dy', dy, x.shape);
  const native = runFused('DdpGeluGrad', [dy, x]);
  if (native) return native[0];
  return tf.tidy(() => {
    const cdf = tf.mul(0.5, tf.add(1, tf.erf(tf.mul(x, INV_SQRT_2))));
    const pdf = tf.mul(tf.exp(tf.mul(tf.square(x), -0.5)), INV_SQRT_2PI);
    return tf.mul(dy, tf.add(cdf, tf.mul(x, pdf)));
  });
}

/**
 * ReLU's gradient as torch's threshold_backward: 0 where x <= 0, dy elsewhere (also where x is
 * NaN). Was dy·step(x): NaN where x was NaN, and dy·0 = NaN where dy was ±∞ or NaN at a dead unit.
 */
export function reluGrad(dy: tf.Tensor, x: tf.Tensor): tf.Tensor {
  expectShape('reluGrad', 'dy', dy, x.shape);
  const native = runFused('DdpReluGrad', [dy, x]);
  if (native) return native[0];
  return tf.tidy(() => tf.where(tf.lessEqual(x, 0), tf.zerosLike(dy), dy));
}

function channelAxis(op: string, x: tf.Tensor, axis: number): void {
  if (!Number.isInteger(axis) || axis < 0 || axis >= x.rank) {
    throw new FusedOpError(`${op}: channel axis ${axis} is not an axis of a rank-${x.rank} tensor`);
  }
}

/** x + bias along x's channel axis `axis` (a convolution's bias: NCHW's axis 1, NHWC's last), bias of shape [C]. */
export function biasAdd(x: tf.Tensor, bias: tf.Tensor, axis: number): tf.Tensor {
  channelAxis('biasAdd', x, axis);
  expectShape('biasAdd', 'bias', bias, [x.shape[axis]]);
  const native = runFused('DdpBiasAdd', [x, bias], { axis });
  if (native) return native[0];
  return tf.tidy(() => tf.add(x, tf.reshape(bias, [-1, ...Array<number>(x.rank - 1 - axis).fill(1)])));
}

/** Σ of x over every axis but `axis`, shape [C]: biasAdd's bias gradient. */
export function channelSum(x: tf.Tensor, axis: number): tf.Tensor {
  channelAxis('channelSum', x, axis);
  const native = runFused('DdpChannelSum', [x], { axis });
  if (native) return native[0];
  // over the trailing axes, then the leading ones (two sums tfjs-wasm and the native Sum run in one pass each)
  const [outer, channels, inner] = aroundAxis(x.shape, axis);
  return tf.tidy(() => tf.sum(tf.sum(tf.reshape(x, [outer, channels, inner]), 2), 0));
}

/** Softmax over the last axis, the row maximum subtracted first. */
export function softmax(x: tf.Tensor): tf.Tensor {
  lastDim('softmax', x);
  const native = runFused('DdpSoftmax', [x]);
  if (native) return native[0];
  return tf.softmax(x);
}

/** Gradient of softmax over the last axis given its output y: y·(dy − Σ dy·y). */
export function softmaxGrad(dy: tf.Tensor, y: tf.Tensor): tf.Tensor {
  lastDim('softmaxGrad', y);
  expectShape('softmaxGrad', 'dy', dy, y.shape);
  const native = runFused('DdpSoftmaxGrad', [dy, y]);
  if (native) return native[0];
  return tf.tidy(() => tf.mul(y, tf.sub(dy, tf.sum(tf.mul(dy, y), -1, true))));
}
