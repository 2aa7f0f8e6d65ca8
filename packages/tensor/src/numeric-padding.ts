import type * as tf from '@tensorflow/tfjs-core';
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

type Padding = tf.Conv2DAttrs['pad'];

/**
 * A numeric padding p as the explicit one it means: [[0, 0], [p, p], [p, p], [0, 0]] (NCHW: p on
 * the last two dims); any other padding as it is. tfjs 4.22 sizes a numeric padding's output with
 * the filter's height and the stride's height for both dims (conv_util.js, getPadAndOutInfo): a
 * [3, 2] filter with pad 0 gave an output one column short of torch's, and tfjs-wasm's kernel
 * wrote the missing column past its end, over other tensors. An explicit padding is sized per dim.
 * Every geometry computed here from a kernel's attributes goes through this.
 */
export function explicitPadding(pad: Padding, nchw = false): Exclude<Padding, number> {
  if (typeof pad !== 'number') return pad;
  const p: [number, number] = [pad, pad];
  return nchw ? [[0, 0], [0, 0], p, p] : [[0, 0], p, p, [0, 0]];
}

/** The kernels whose geometry tfjs computes from a `pad` attribute with getPadAndOutInfo. */
const PADDED_KERNELS = [
  'Conv2D',
  'Conv2DBackpropInput',
  'Conv2DBackpropFilter',
  'DepthwiseConv2dNative',
  'DepthwiseConv2dNativeBackpropInput',
  'DepthwiseConv2dNativeBackpropFilter',
  'FusedConv2D',
  'FusedDepthwiseConv2D',
  'MaxPool',
  'MaxPoolGrad',
  'MaxPoolWithArgmax',
  'AvgPool',
  'AvgPoolGrad',
] as const;

/** The forward convolutions tfjs-wasm hands to XNNPACK, whose 'same' is wrong where TF's padding would be negative. */
const XNNPACK_CONVOLUTIONS = new Set(['Conv2D', 'FusedConv2D', 'DepthwiseConv2dNative', 'FusedDepthwiseConv2D']);

/**
 * tfjs's own kernels of `backend` given explicit paddings for numeric ones, and on wasm for the
 * convolutions' 'same' (registered before any wrapper).
 */
export function registerExplicitPadding(backend: 'wasm' | 'cpu'): void {
  for (const name of PADDED_KERNELS) {
    const same = backend === 'wasm' && XNNPACK_CONVOLUTIONS.has(name);
    wrapKernel(name, backend, (kernelFunc) => (args) => {
      const attrs = args.attrs as NamedAttrMap | undefined;
      const nchw = attrs?.dataFormat === 'NCHW';
      let pad: Padding;
      if (typeof attrs?.pad === 'number') pad = explicitPadding(attrs.pad, nchw);
      else if (same && attrs?.pad === 'same') pad = sameAsExplicit(args.inputs, attrs, nchw);
      else return kernelFunc(args);
      return kernelFunc({ ...args, attrs: { ...attrs, pad } as unknown as NamedAttrMap });
    });
  }
}

/**
 * TF's 'same' padding as the explicit one it means: output ceil(in / stride), the total padding
 * (out − 1)·stride + (k − 1)·dilation + 1 − in, at least 0, the odd element after. tfjs-wasm's
 * XNNPACK convolution did not clamp it: a [1, 3] filter at stride [2, 1] on 2 × 5 inputs came out
 * wrong by O(1), silently (probe DA); the explicit padding is right on every path.
 */
function sameAsExplicit(inputs: tf.NamedTensorInfoMap, attrs: NamedAttrMap, nchw: boolean): Exclude<Padding, number> {
  const [x, filter] = [inputs.x as tf.TensorInfo, inputs.filter as tf.TensorInfo];
  const pair = (v: unknown) => (typeof v === 'number' ? [v, v] : ((v as [number, number]) ?? [1, 1]));
  const [strides, dilations] = [pair(attrs.strides), pair(attrs.dilations)];
  const spatial = nchw ? x.shape.slice(2, 4) : x.shape.slice(1, 3);
  const [rows, columns] = spatial.map((size, d): [number, number] => {
    const out = Math.ceil(size / strides[d]);
    const total = Math.max(0, (out - 1) * strides[d] + (filter.shape[d] - 1) * dilations[d] + 1 - size);
    return [Math.floor(total / 2), total - Math.floor(total / 2)];
  });
  return nchw ? [[0, 0], [0, 0], rows, columns] : [[0, 0], rows, columns, [0, 0]];
}
