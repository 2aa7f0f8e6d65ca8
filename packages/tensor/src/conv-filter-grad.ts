import type { KernelBackend, KernelConfig, KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { explicitPadding } from './numeric-padding.js';

/**
 * The conv2d weight gradient as one dilated convolution, on any backend's own kernels.
 * tfjs's cpu Conv2DBackpropFilter is a scalar loop (about 1 s for an [8,16,16,8] input and
 * a 3x3x8x16 filter) and wasm has none. With x padded to xp [N, Hp, Wp, Ci]:
 *   dW[a, b, ci, co] = Σ_{n,i,j} xp[n, a + i·sh, b + j·sw, ci] · dy[n, i, j, co]
 * which is Conv2D(xpᵀ [Ci, Hp, Wp, N], dyᵀ [Ho, Wo, N, Co], stride 1, dilation (sh, sw)),
 * transposed from [Ci, kh, kw, Co] to [kh, kw, Ci, Co].
 */
function dilatedConvFilterGrad(backendName: string, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const { inputs, backend } = args;
    const attrs = args.attrs as unknown as tf.Conv2DBackpropFilterAttrs;
    if (attrs.dataFormat === 'NCHW') return fallback(args);
    const x = inputs.x as TensorInfo;
    const dy = inputs.dy as TensorInfo;
    const [kh, kw] = attrs.filterShape;
    const info = tf.backend_util.computeConv2DInfo(
      x.shape as [number, number, number, number],
      attrs.filterShape,
      attrs.strides,
      1,
      explicitPadding(attrs.pad),
      attrs.dimRoundingMode,
    );
    const { strideHeight: sh, strideWidth: sw, outHeight, outWidth, padInfo } = info;
    const [n, h, w, ci] = x.shape as [number, number, number, number];
    const needH = (outHeight - 1) * sh + kh;
    const needW = (outWidth - 1) * sw + kw;
    const be = backend as KernelBackend;
    const run = (name: string, ins: Record<string, TensorInfo>, at: NamedAttrMap) =>
      (tf.getKernel(name, backendName) as KernelConfig).kernelFunc({
        inputs: ins,
        attrs: at,
        backend: be,
      }) as TensorInfo;
    const temps: TensorInfo[] = [];
    const keep = (t: TensorInfo) => {
      temps.push(t);
      return t;
    };
    try {
      // Pad (top/left as the forward did) and cut to exactly the rows and columns the filter sweeps.
      const padded = keep(
        run('PadV2', { x }, {
          paddings: [
            [0, 0],
            [padInfo.top, Math.max(0, needH - h - padInfo.top)],
            [padInfo.left, Math.max(0, needW - w - padInfo.left)],
            [0, 0],
          ],
          constantValue: 0,
        } as unknown as NamedAttrMap),
      );
      const cut = keep(run('Slice', { x: padded }, { begin: [0, 0, 0, 0], size: [n, needH, needW, ci] }));
      const xt = keep(run('Transpose', { x: cut }, { perm: [3, 1, 2, 0] }));
      const dyt = keep(run('Transpose', { x: dy }, { perm: [1, 2, 0, 3] }));
      const convAttrs = {
        strides: [1, 1],
        pad: 'valid',
        dataFormat: 'NHWC',
        dilations: [sh, sw],
        dimRoundingMode: undefined,
      };
      const out = keep(run('Conv2D', { x: xt, filter: dyt }, convAttrs as unknown as NamedAttrMap));
      return run('Transpose', { x: out }, { perm: [1, 2, 0, 3] });
    } finally {
      for (const t of temps) be.disposeData(t.dataId);
    }
  };
}

/** Replaces (cpu) or supplies (wasm) Conv2DBackpropFilter with the dilated-convolution form. */
export function registerConvFilterGrad(backendName: 'cpu' | 'wasm', fallback: KernelFunc): void {
  const existing: KernelConfig | undefined = tf.getKernel('Conv2DBackpropFilter', backendName);
  if (existing) tf.unregisterKernel('Conv2DBackpropFilter', backendName);
  tf.registerKernel({
    kernelName: 'Conv2DBackpropFilter',
    backendName,
    kernelFunc: dilatedConvFilterGrad(backendName, fallback),
  });
}
