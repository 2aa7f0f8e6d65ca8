import type { KernelBackend, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';
import { explicitPadding } from './numeric-padding.js';
import { runOnCpuWhen, someInput } from './run-on-cpu.js';

type Conv2DAttrs = {
  strides: [number, number] | number;
  pad: 'valid' | 'same' | number;
  dataFormat: 'NHWC' | 'NCHW';
  dilations: [number, number] | number;
  dimRoundingMode?: 'floor' | 'round' | 'ceil';
};

const isEmpty = (shape: number[]) => shape.includes(0);

/** The output shape of a kernel below from its inputs' shapes and attributes, without running it. */
const OUTPUT_SHAPE: Record<string, (inputs: TensorInfo[], attrs: NamedAttrMap) => number[]> = {
  BatchMatMul: ([a, b], attrs) => {
    const { transposeA, transposeB } = attrs as unknown as tf.BatchMatMulAttrs;
    const inner = [a.shape[a.shape.length - (transposeA ? 2 : 1)], b.shape[b.shape.length - (transposeB ? 1 : 2)]];
    // the kernel's own check, which this shortcut skips: [0, 3]·[4, 2] gave [0, 2] (probe DA; torch raises)
    if (inner[0] !== inner[1])
      throw new Error(
        `Error in matMul: inner shapes (${inner[0]}) and (${inner[1]}) of Tensors with shapes ${a.shape} and ` +
          `${b.shape} and transposeA=${transposeA} and transposeB=${transposeB} must match.`,
      );
    const batch = tf.broadcast_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const rows = a.shape[a.shape.length - (transposeA ? 1 : 2)];
    const cols = b.shape[b.shape.length - (transposeB ? 2 : 1)];
    return [...batch, rows, cols];
  },
  Conv2D: ([x, filter], attrs) => convOutShape(x, filter, attrs, false),
  DepthwiseConv2dNative: ([x, filter], attrs) => convOutShape(x, filter, attrs, true),
  Conv2DBackpropInput: (_, attrs) => [...(attrs.inputShape as number[])],
  Conv2DBackpropFilter: (_, attrs) => [...(attrs.filterShape as number[])],
  DepthwiseConv2dNativeBackpropInput: (_, attrs) => [...(attrs.inputShape as number[])],
  DepthwiseConv2dNativeBackpropFilter: (_, attrs) => [...(attrs.filterShape as number[])],
  Transpose: ([x], attrs) => (attrs.perm as number[]).map((d) => x.shape[d]),
};

function convOutShape(x: TensorInfo, filter: TensorInfo, attrs: NamedAttrMap, depthwise: boolean): number[] {
  const { strides, pad, dataFormat, dilations, dimRoundingMode } = attrs as unknown as Conv2DAttrs;
  const format = tf.backend_util.convertConv2DDataFormat(dataFormat);
  const info = tf.backend_util.computeConv2DInfo(
    x.shape as [number, number, number, number],
    filter.shape as [number, number, number, number],
    strides,
    dilations,
    explicitPadding(pad, format === 'channelsFirst'),
    dimRoundingMode,
    depthwise,
    format,
  );
  return info.outShape;
}

/**
 * Products and convolutions with an empty operand, made torch's: every output element is a sum
 * over no term, so 0 (and an empty output is just empty). tfjs-wasm 4.22 left the output
 * unwritten — a Linear layer's weight gradient over an empty batch (dyᵀ·x with no row) returned
 * whatever the heap held there, silently — and its Transpose (so a convolution of an empty batch)
 * raised "divide by zero". The native kernels already give zeros; they wrap these, so one rule
 * serves every path, and the cpu backend is held to the same.
 */
export function registerEmptyOperands(): void {
  for (const backendName of ['wasm', 'cpu']) {
    for (const [name, outputShape] of Object.entries(OUTPUT_SHAPE)) {
      wrapKernel(name, backendName, (kernelFunc) => (args) => {
        const inputs = Object.values(args.inputs) as TensorInfo[];
        if (!inputs.some((t) => isEmpty(t.shape))) return kernelFunc(args);
        const shape = outputShape(inputs, args.attrs ?? {});
        const dtype = inputs[0].dtype;
        const zeros = tf.util.getTypedArrayFromDType(dtype as 'float32', tf.util.sizeFromShape(shape));
        return { dataId: (args.backend as KernelBackend).write(zeros, shape, dtype), shape, dtype };
      });
    }
  }
}

/**
 * Raw ops tfjs-wasm 4.22 gets wrong on an empty input, run on cpu then: gather of a [0, 3] tensor
 * gave shape [1, 0, 1, 1] (cpu and torch: [0, 1]), topk, cumsum and cumprod trapped with "divide by
 * zero" (probe CZ). Autograd's own gather works around it; the `tf` @ddp/tensor re-exports did not.
 */
const WRONG_WHEN_EMPTY_ON_WASM = ['GatherV2', 'TopK', 'Cumsum', 'Cumprod'] as const;

export function registerEmptyOnCpu(): void {
  for (const name of WRONG_WHEN_EMPTY_ON_WASM) runOnCpuWhen(name, (args) => someInput(args, (t) => isEmpty(t.shape)));
}
