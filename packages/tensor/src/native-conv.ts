import type { ConvGeometry, NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { explicitPadding } from './numeric-padding.js';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

type Shape4 = [number, number, number, number];
type ConvPass = 'Conv2D' | 'Conv2DBackpropInput' | 'Conv2DBackpropFilter';

type Conv2DInfo = tf.backend_util.Conv2DInfo;
const filterShape = (c: Conv2DInfo) => [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
/**
 * The two inputs of each pass in the addon's argument order, with the shapes the geometry implies, and the output's.
 */
const PASSES: Record<
  ConvPass,
  { inputs: [string, string]; shapes: (c: Conv2DInfo) => number[][]; out: (c: Conv2DInfo) => number[] }
> = {
  Conv2D: { inputs: ['x', 'filter'], shapes: (c) => [c.inShape, filterShape(c)], out: (c) => c.outShape },
  Conv2DBackpropInput: { inputs: ['dy', 'filter'], shapes: (c) => [c.outShape, filterShape(c)], out: (c) => c.inShape },
  Conv2DBackpropFilter: { inputs: ['x', 'dy'], shapes: (c) => [c.inShape, c.outShape], out: filterShape },
};

/** The geometry tfjs computes for the pass, from the pass's own attributes (shapes in their data format). */
function convInfo(
  pass: ConvPass,
  inputs: Record<string, TensorInfo>,
  attrs: Record<string, unknown>,
  nchw: boolean,
): Conv2DInfo {
  const { strides, pad, dimRoundingMode } = attrs as unknown as tf.Conv2DAttrs;
  const xShape = (pass === 'Conv2DBackpropInput' ? attrs.inputShape : inputs.x.shape) as Shape4;
  const filterShape = (pass === 'Conv2DBackpropFilter' ? attrs.filterShape : inputs.filter.shape) as Shape4;
  const dilations = pass === 'Conv2D' ? (attrs as unknown as tf.Conv2DAttrs).dilations : 1;
  const format = nchw ? 'channelsFirst' : 'channelsLast';
  return tf.backend_util.computeConv2DInfo(
    xShape,
    filterShape,
    strides,
    dilations,
    explicitPadding(pad, nchw),
    dimRoundingMode,
    false,
    format,
  );
}

/** The addon's geometry arguments of a Conv2DInfo. */
export const convGeometry = (c: Conv2DInfo, nchw: boolean): ConvGeometry => [
  c.batchSize,
  c.inHeight,
  c.inWidth,
  c.inChannels,
  c.filterHeight,
  c.filterWidth,
  c.outChannels,
  c.strideHeight,
  c.strideWidth,
  c.dilationHeight,
  c.dilationWidth,
  c.padInfo.top,
  c.padInfo.left,
  c.outHeight,
  c.outWidth,
  nchw,
];

const NHWC = [0, 2, 3, 1];
const NCHW = [0, 3, 1, 2];
const toNHWC = <T>(dims: T[]) => NHWC.map((d) => dims[d]!);

/**
 * An NCHW pass through `fallback`, whose kernels (tfjs's) take NHWC only: activations transposed
 * to NHWC by the backend's Transpose kernel and the result back, paddings and shapes translated.
 */
function throughNHWC(pass: ConvPass, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const backend = args.backend as tf.KernelBackend;
    const transpose = (x: TensorInfo, perm: number[]) =>
      tf.getKernel('Transpose', tf.getBackend()).kernelFunc({ inputs: { x }, backend, attrs: { perm } }) as TensorInfo;
    const attrs = args.attrs as Record<string, unknown>;
    const pad = Array.isArray(attrs.pad) ? toNHWC(attrs.pad as number[]) : attrs.pad;
    const shapes = pass === 'Conv2DBackpropInput' ? { inputShape: toNHWC(attrs.inputShape as number[]) } : {};
    const temporaries: TensorInfo[] = [];
    const inputs: Record<string, TensorInfo> = {};
    for (const [name, t] of Object.entries(args.inputs as Record<string, TensorInfo>)) {
      inputs[name] = name === 'filter' ? t : temporaries[temporaries.push(transpose(t, NHWC)) - 1];
    }
    const out = fallback({
      ...args,
      inputs,
      attrs: { ...attrs, ...shapes, pad, dataFormat: 'NHWC' } as never,
    }) as TensorInfo;
    const result = pass === 'Conv2DBackpropFilter' ? out : transpose(out, NCHW); // filters are HWIO either way
    if (result !== out) temporaries.push(out);
    for (const t of temporaries) backend.disposeData(t.dataId);
    return result;
  };
}

/**
 * Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter on the wasm heap through the addon
 * (oneDNN, no copies of inputs or outputs), on NHWC activations or NCHW ones (dataFormat, as
 * @ddp/autograd's conv2d passes them: no transposes around the kernel). Other dtypes go to
 * `fallback`, tfjs's (or @ddp/tensor's) kernel, NCHW through transposes.
 */
export function nativeConv(pass: ConvPass, native: NativeKernels, nhwcFallback: KernelFunc): KernelFunc {
  const spec = PASSES[pass];
  const nchwFallback = throughNHWC(pass, nhwcFallback);
  return (args) => {
    const backend = asWasmBackend(args.backend);
    const inputs = args.inputs as Record<string, TensorInfo>;
    const [first, second] = spec.inputs.map((name) => inputs[name]) as [TensorInfo, TensorInfo];
    const nchw = (args.attrs as { dataFormat?: string }).dataFormat === 'NCHW';
    const fallback = nchw ? nchwFallback : nhwcFallback;
    if (!backend || first.dtype !== 'float32' || second.dtype !== 'float32') return fallback(args);
    const firstOffset = heapOffset(backend, first);
    const secondOffset = heapOffset(backend, second);
    if (firstOffset === null || secondOffset === null) return fallback(args);
    const c = convInfo(pass, inputs, args.attrs as Record<string, unknown>, nchw);
    // inputs that disagree with the geometry: tfjs's kernel decides (the ops check shapes before)
    const expected = spec.shapes(c);
    if (![first, second].every((t, i) => tf.util.arraysEqual(t.shape, expected[i]))) return fallback(args);
    const geometry = convGeometry(c, nchw);
    const out = makeAlignedOutput(backend, spec.out(c));
    // read the heap after makeOutput: an allocation may have replaced it
    native[pass](backend.wasm.HEAPU8, firstOffset, secondOffset, heapOffset(backend, out)!, ...geometry);
    return out;
  };
}
