import { biasAdd, channelSum, convTakesNCHW, nativeConv2d, nativeConv2dGrads, tf } from '@ddp/tensor';
import { type AutocastDtype, autocastDtype, maybeRound } from '../autocast.js';
import { AutogradArgumentError, AutogradError, checkOptions } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { requireFloat32 } from './promotion.js';

/** A size per spatial dim: one number for both, or [height, width] ([v] as torch: v for both). */
export type Pair = number | [number] | [number, number];
const pair = (v: Pair): [number, number] => (typeof v === 'number' ? [v, v] : v.length === 1 ? [v[0], v[0]] : v);
const toNHWC = (t: tf.Tensor) => tf.transpose(t, [0, 2, 3, 1]);
const toNCHW = (t: tf.Tensor) => tf.transpose(t, [0, 3, 1, 2]);
type Padding = [[number, number], [number, number], [number, number], [number, number]];
const explicit = ([ph, pw]: [number, number]): Padding => [
  [0, 0],
  [ph, ph],
  [pw, pw],
  [0, 0],
];

/**
 * 2-D convolution, NCHW activations and OIHW weights at the API (PyTorch's layout). With the
 * native kernels, one call each way on those layouts (the bias inside the convolution, both
 * gradients together: nativeConv2d); elsewhere tfjs's kernels, whose activations are NHWC
 * (transposed around each kernel) and filters HWIO.
 */
class Conv2d extends AutogradFunction {
  private strides: [number, number] = [1, 1];
  private padding: [number, number] = [0, 0];
  private nchw = false;
  /** Whether forward ran nativeConv2d (then backward runs nativeConv2dGrads on the saved x and weight). */
  private direct = false;
  private xShape: number[] = [];
  private wShape: number[] = [];
  private lower: AutocastDtype | null = null;

  private attrs(): Record<string, unknown> {
    const [ph, pw] = this.padding;
    const pad = this.nchw
      ? [
          [0, 0],
          [0, 0],
          [ph, ph],
          [pw, pw],
        ]
      : explicit(this.padding);
    return { strides: this.strides, pad, dataFormat: this.nchw ? 'NCHW' : 'NHWC', dilations: 1 };
  }

  forward(ctx: Context, x: tf.Tensor, w: tf.Tensor, b: tf.Tensor | null, stride: Pair, padding: Pair): tf.Tensor {
    if (x.rank !== 4 || w.rank !== 4 || x.shape[1] !== w.shape[1]) {
      throw new AutogradArgumentError(`conv2d: input [${x.shape}] (NCHW) does not match weight [${w.shape}] (OIHW)`);
    }
    this.strides = pair(stride);
    this.padding = pair(padding);
    this.nchw = convTakesNCHW();
    this.lower = autocastDtype();
    [x, w, b] = [maybeRound(x, this.lower), maybeRound(w, this.lower), b && maybeRound(b, this.lower)];
    const direct = this.nchw ? nativeConv2d(x, w, b, { strides: this.strides, padding: this.padding }) : null;
    if (direct) {
      this.direct = true;
      ctx.saveForBackward(x, w);
      return maybeRound(direct, this.lower);
    }
    const xk = this.nchw ? x : toNHWC(x);
    const wh = tf.transpose(w, [2, 3, 1, 0]); // OIHW -> HWIO
    this.xShape = xk.shape;
    this.wShape = wh.shape;
    ctx.saveForBackward(xk, wh);
    let y = tf.engine().runKernel('Conv2D', { x: xk, filter: wh }, this.attrs() as tf.NamedAttrMap) as tf.Tensor;
    if (b) y = biasAdd(y, b, this.nchw ? 1 : 3);
    return maybeRound(this.nchw ? y : toNCHW(y), this.lower);
  }

  backward(ctx: Context, dyIn: tf.Tensor) {
    const dy = maybeRound(dyIn, this.lower);
    const lower = (g: tf.Tensor | null) => g && maybeRound(g, this.lower);
    const needs = ctx.needsInputGrad;
    if (!this.direct) return [...this.throughKernels(ctx, dy).map(lower), null, null];
    const [x, w] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const spec = { strides: this.strides, padding: this.padding };
    const grads = nativeConv2dGrads(x, w, dy, spec, { dx: needs[0], dBias: needs[2] });
    if (!grads) throw new AutogradError('conv2d: native kernels switched off between forward and backward');
    return [lower(grads.dx), needs[1] ? lower(grads.dWeight) : null, lower(grads.dBias), null, null];
  }

  /** dx, dw, db through the backend's gradient kernels from the saved x (NHWC unless this.nchw) and HWIO filter. */
  private throughKernels(ctx: Context, dy: tf.Tensor): (tf.Tensor | null)[] {
    const [xk, wh] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const dyk = this.nchw ? dy : toNHWC(dy);
    const attrs = this.attrs();
    const run = (name: string, inputs: tf.NamedTensorMap, extra: object) =>
      tf.engine().runKernel(name, inputs, { ...attrs, ...extra } as tf.NamedAttrMap) as tf.Tensor;
    let dx = ctx.needsInputGrad[0]
      ? run('Conv2DBackpropInput', { dy: dyk, filter: wh }, { inputShape: this.xShape })
      : null;
    if (dx && !this.nchw) dx = toNCHW(dx);
    const dw = ctx.needsInputGrad[1]
      ? tf.transpose(run('Conv2DBackpropFilter', { x: xk, dy: dyk }, { filterShape: this.wShape }), [3, 2, 0, 1])
      : null;
    const db = ctx.needsInputGrad[2] ? channelSum(dy, 1) : null;
    return [dx, dw, db];
  }
}

/**
 * g [N, OH, OW, C] placed at rows i + sh·oh and columns j + sw·ow of a zero [N, hp, wp, C]:
 * zeros interleaved after each element (the stride), then shifted by the window offset.
 */
type Dims = [number, number];

function spread(g: tf.Tensor, [i, j]: Dims, [sh, sw]: Dims, [hp, wp]: Dims): tf.Tensor {
  const [n, oh, ow, c] = g.shape as [number, number, number, number];
  const interleave: [number, number][] = [
    [0, 0],
    [0, 0],
    [0, sh - 1],
    [0, 0],
    [0, sw - 1],
    [0, 0],
  ];
  const strided = tf.pad(tf.reshape(g, [n, oh, 1, ow, 1, c]), interleave);
  const rows = Math.min(oh * sh, hp - i);
  const cols = Math.min(ow * sw, wp - j);
  const cut = tf.slice(tf.reshape(strided, [n, oh * sh, ow * sw, c]), [0, 0, 0, 0], [n, rows, cols, c]);
  return tf.pad(cut, [
    [0, 0],
    [i, hp - i - rows],
    [j, wp - j - cols],
    [0, 0],
  ]);
}

/**
 * The max-pool gradient from tfjs's generic ops, not the MaxPoolGrad kernel (wasm 4.22's starts
 * its running maximum at the smallest positive float, so all-negative windows got no gradient).
 * Each window's dy goes where torch's CPU kernel (`val > max || isnan(val)`, row-major) puts it:
 * its first maximum, or its last NaN, never padding (an all −∞ window matched the −∞ padding and
 * lost its gradient); windows that overlap add up. x, y, dy are NHWC. Runs inside backward's tidy.
 */
function maxPoolGrad(x: tf.Tensor, y: tf.Tensor, dy: tf.Tensor, kernel: Dims, stride: Dims, padding: Dims): tf.Tensor {
  const [n, h, w, c] = x.shape as [number, number, number, number];
  const [, oh, ow] = y.shape as [number, number, number, number];
  const [ph, pw] = padding;
  const padded: Dims = [h + 2 * ph, w + 2 * pw];
  const xp = tf.pad(x, explicit(padding), -Infinity);
  const inside = tf.pad(tf.onesLike(x), explicit(padding), 0);
  /** t at window offset [i, j] of every window, shaped as y. */
  const at = (t: tf.Tensor, [i, j]: Dims) =>
    tf.stridedSlice(
      t,
      [0, i, j, 0],
      [n, i + stride[0] * (oh - 1) + 1, j + stride[1] * (ow - 1) + 1, c],
      [1, ...stride, 1],
    );
  /** Per offset in `order`, the windows in which it is the first to match. */
  const firstMatch = (order: Dims[], matches: (offset: Dims) => tf.Tensor) => {
    let taken = tf.zeros(y.shape, 'bool');
    return order.map((offset) => {
      const first = tf.logicalAnd(matches(offset), tf.logicalNot(taken));
      taken = tf.logicalOr(taken, first);
      return first;
    });
  };
  const offsets = Array.from(
    { length: kernel[0] * kernel[1] },
    (_, k): Dims => [Math.floor(k / kernel[1]), k % kernel[1]],
  );
  // a NaN window's y is NaN, equal to no candidate; a window without NaN has no NaN to take
  const firstMax = firstMatch(offsets, (o) => tf.logicalAnd(tf.equal(at(xp, o), y), tf.greater(at(inside, o), 0)));
  const lastNaN = firstMatch([...offsets].reverse(), (o) => tf.isNaN(at(xp, o))).reverse();
  let dxp = tf.zeros([n, ...padded, c]);
  offsets.forEach((offset, k) => {
    const taken = tf.logicalOr(firstMax[k], lastNaN[k]);
    dxp = tf.add(dxp, spread(tf.where(taken, dy, tf.zerosLike(dy)), offset, stride, padded));
  });
  return tf.slice(dxp, [0, ph, pw, 0], [n, h, w, c]);
}

class MaxPool2d extends AutogradFunction {
  private kernel: Dims = [1, 1];
  private stride: Dims = [1, 1];
  private padding: Dims = [0, 0];
  forward(ctx: Context, x: tf.Tensor, kernel: Pair, stride: Pair, padding: Pair): tf.Tensor {
    const xh = toNHWC(x) as tf.Tensor4D;
    [this.kernel, this.stride, this.padding] = [pair(kernel), pair(stride), pair(padding)];
    const attrs = { filterSize: this.kernel, strides: this.stride, pad: explicit(this.padding) };
    const max = tf.engine().runKernel('MaxPool', { x: xh }, attrs) as tf.Tensor;
    // tfjs's kernel skips NaN; torch's window holding a NaN is NaN (so a NaN check sees it)
    const nan = tf.engine().runKernel('MaxPool', { x: tf.cast(tf.isNaN(xh), 'float32') }, attrs) as tf.Tensor;
    const yh = tf.where(tf.greater(nan, 0), tf.fill(max.shape, Number.NaN), max);
    ctx.saveForBackward(xh, yh);
    return toNCHW(yh);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [xh, yh] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    return [toNCHW(maxPoolGrad(xh, yh, toNHWC(dy), this.kernel, this.stride, this.padding)), null, null, null];
  }
}

/**
 * Refuses a window torch refuses: kernel and stride below 1, negative padding, max-pool padding
 * over half the kernel, or a kernel larger than the padded input (tfjs gave an empty [1, 1, 0, 0]
 * output, or pooled windows lying wholly in the padding).
 */
function checkWindow(op: string, x: Tensor, kernel: Pair, stride: Pair, padding: Pair): void {
  // a list of another length (or 'same') reached the kernels: NaN sizes, a wasm out-of-bounds write
  // into other tensors' memory
  const sizes = { kernel, stride, padding };
  for (const [name, v] of Object.entries(sizes)) {
    if (!(typeof v === 'number' || (Array.isArray(v) && (v.length === 1 || v.length === 2))))
      throw new AutogradArgumentError(
        `${op}: ${name} must be a number or a list of 1 or 2 numbers, got ${JSON.stringify(v)}`,
      );
  }
  // a batch may be empty, not the channels or the image: [1, 0, 4, 4] came back empty (torch raises; probe CY)
  if (x.rank !== 4 || (op === 'maxPool2d' && x.shape.slice(1).includes(0)))
    throw new AutogradArgumentError(
      `${op}: input must be 4-D [N, C, H, W] with C, H, W > 0 (a batch of one: unsqueeze(0)), got [${x.shape}]`,
    );
  const [k, s, p] = [pair(kernel), pair(stride), pair(padding)];
  const whole = (v: number, min: number) => Number.isInteger(v) && v >= min;
  if (!(k.every((v) => whole(v, 1)) && s.every((v) => whole(v, 1)) && p.every((v) => whole(v, 0)))) {
    throw new AutogradArgumentError(
      `${op}: kernel [${k}] and stride [${s}] must be integers >= 1, padding [${p}] >= 0`,
    );
  }
  if (op === 'maxPool2d' && p.some((v, i) => v > k[i] / 2))
    throw new AutogradArgumentError(`${op}: padding [${p}] must be at most half the kernel [${k}]`);
  if (x.shape.slice(2).some((d, i) => d + 2 * p[i] < k[i])) {
    throw new AutogradArgumentError(`${op}: kernel [${k}] is larger than the input [${x.shape}] padded by [${p}]`);
  }
}

/** F.conv2d: x [N, C, H, W], weight [O, C, kH, kW], optional bias [O]; zero padding. */
export function conv2d(
  x: Tensor,
  weight: Tensor,
  bias: Tensor | null = null,
  opts: { stride?: Pair; padding?: Pair } = {},
): Tensor {
  checkOptions('conv2d', opts, ['stride', 'padding']);
  requireFloat32('conv2d', x, weight, bias);
  const [stride, padding] = [opts.stride ?? 1, opts.padding ?? 0];
  if (weight.rank !== 4)
    throw new AutogradArgumentError(`conv2d: weight must be 4-D [O, C, kH, kW], got [${weight.shape}]`);
  checkWindow('conv2d', x, weight.shape.slice(2, 4) as [number, number], stride, padding);
  // the native kernel took any bias of O elements ([4, 1]: its backward failed), tfjs's refused it
  if (bias !== null && (bias.rank !== 1 || bias.shape[0] !== weight.shape[0]))
    throw new AutogradArgumentError(`conv2d: bias must be 1-D of ${weight.shape[0]} elements, got [${bias.shape}]`);
  return Conv2d.apply(x, weight, bias, stride, padding);
}

/** F.max_pool2d on NCHW input; stride defaults to the kernel size. */
export function maxPool2d(x: Tensor, kernelSize: Pair, opts: { stride?: Pair; padding?: Pair } = {}): Tensor {
  checkOptions('maxPool2d', opts, ['stride', 'padding']);
  requireFloat32('maxPool2d', x);
  const [stride, padding] = [opts.stride ?? kernelSize, opts.padding ?? 0];
  checkWindow('maxPool2d', x, kernelSize, stride, padding);
  return MaxPool2d.apply(x, kernelSize, stride, padding);
}
