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

/** tfjs's own kernels of `backend` given explicit paddings for numeric ones (registered before any wrapper). */
export function registerExplicitPadding(backend: 'wasm' | 'cpu'): void {
  for (const name of PADDED_KERNELS) {
    wrapKernel(name, backend, (kernelFunc) => (args) => {
      const attrs = args.attrs as NamedAttrMap | undefined;
      if (typeof attrs?.pad !== 'number') return kernelFunc(args);
      const pad = explicitPadding(attrs.pad, attrs.dataFormat === 'NCHW');
      return kernelFunc({ ...args, attrs: { ...attrs, pad } as unknown as NamedAttrMap });
    });
  }
}
