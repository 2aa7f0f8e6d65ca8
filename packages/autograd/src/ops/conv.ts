import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';

/** A size per spatial dim: one number for both, or [height, width]. */
export type Pair = number | [number, number];
const pair = (v: Pair): [number, number] => (typeof v === 'number' ? [v, v] : v);
const toNHWC = (t: tf.Tensor) => tf.transpose(t, [0, 2, 3, 1]);
const toNCHW = (t: tf.Tensor) => tf.transpose(t, [0, 3, 1, 2]);
type Padding = [[number, number], [number, number], [number, number], [number, number]];
const explicit = ([ph, pw]: [number, number]): Padding => [[0, 0], [ph, ph], [pw, pw], [0, 0]];

/** 2-D convolution, NCHW activations and OIHW weights at the API (PyTorch's layout). */
class Conv2d extends AutogradFunction {
  private strides: [number, number] = [1, 1];
  private pad: Padding = explicit([0, 0]);
  private xShape: number[] = [];
  private wShape: number[] = [];

  forward(ctx: Context, x: tf.Tensor, w: tf.Tensor, b: tf.Tensor | null, stride: Pair, padding: Pair): tf.Tensor {
    if (x.rank !== 4 || w.rank !== 4 || x.shape[1] !== w.shape[1]) {
      throw new AutogradArgumentError(`conv2d: input [${x.shape}] (NCHW) does not match weight [${w.shape}] (OIHW)`);
    }
    this.strides = pair(stride);
    this.pad = explicit(pair(padding));
    const xh = toNHWC(x);
    const wh = tf.transpose(w, [2, 3, 1, 0]); // OIHW -> HWIO
    this.xShape = xh.shape;
    this.wShape = wh.shape;
    ctx.saveForBackward(xh, wh);
    let y = tf.conv2d(xh as tf.Tensor4D, wh as tf.Tensor4D, this.strides, this.pad);
    if (b) y = tf.add(y, b);
    return toNCHW(y);
  }

  backward(ctx: Context, dy: tf.Tensor) {
    const [xh, wh] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const dyh = toNHWC(dy);
    const attrs = { strides: this.strides, pad: this.pad, dataFormat: 'NHWC' };
    const dx = ctx.needsInputGrad[0]
      ? toNCHW(tf.engine().runKernel('Conv2DBackpropInput', { dy: dyh, filter: wh }, { ...attrs, inputShape: this.xShape }) as tf.Tensor)
      : null;
    const dw = ctx.needsInputGrad[1]
      ? tf.transpose(tf.engine().runKernel('Conv2DBackpropFilter', { x: xh, dy: dyh }, { ...attrs, filterShape: this.wShape }) as tf.Tensor, [3, 2, 0, 1])
      : null;
    const db = ctx.needsInputGrad[2] ? tf.sum(dyh, [0, 1, 2]) : null;
    return [dx, dw, db, null, null];
  }
}

class MaxPool2d extends AutogradFunction {
  private attrs: tf.NamedAttrMap = {};
  forward(ctx: Context, x: tf.Tensor, kernel: Pair, stride: Pair, padding: Pair): tf.Tensor {
    const xh = toNHWC(x) as tf.Tensor4D;
    this.attrs = { filterSize: pair(kernel), strides: pair(stride), pad: explicit(pair(padding)) };
    const yh = tf.engine().runKernel('MaxPool', { x: xh }, this.attrs) as tf.Tensor;
    ctx.saveForBackward(xh, yh);
    return toNCHW(yh);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [xh, yh] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    const dxh = tf.engine().runKernel('MaxPoolGrad', { dy: toNHWC(dy), input: xh, output: yh }, this.attrs) as tf.Tensor;
    return [toNCHW(dxh), null, null, null];
  }
}

/** F.conv2d: x [N, C, H, W], weight [O, C, kH, kW], optional bias [O]; zero padding. */
export function conv2d(x: Tensor, weight: Tensor, bias: Tensor | null = null, opts: { stride?: Pair; padding?: Pair } = {}): Tensor {
  return Conv2d.apply(x, weight, bias, opts.stride ?? 1, opts.padding ?? 0);
}

/** F.max_pool2d on NCHW input; stride defaults to the kernel size. */
export function maxPool2d(x: Tensor, kernelSize: Pair, opts: { stride?: Pair; padding?: Pair } = {}): Tensor {
  return MaxPool2d.apply(x, kernelSize, opts.stride ?? kernelSize, opts.padding ?? 0);
}
