import type { NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

/**
 * Sum of float32 data over leading axes (bias gradients: dy summed over batch and pixels)
 * or trailing axes (row sums of softmax, layer norm) through the addon, in place on the wasm
 * heap; tfjs-wasm transposes and reduces with a scalar loop. Other axes, dtypes and empty
 * tensors go to `fallback`.
 */
export function nativeSum(native: NativeKernels, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const backend = asWasmBackend(args.backend);
    const x = args.inputs.x as TensorInfo;
    const { axis, keepDims } = args.attrs as unknown as tf.SumAttrs;
    const size = tf.util.sizeFromShape(x.shape);
    const xOffset = backend && x.dtype === 'float32' && size > 0 ? heapOffset(backend, x) : null;
    if (!backend || xOffset === null) return fallback(args);
    const axes = tf.util.parseAxisParam(axis, x.shape).sort((a, b) => a - b);
    const rank = x.shape.length;
    const leading = axes.every((a, i) => a === i);
    const trailing = axes.every((a, i) => a === rank - axes.length + i);
    if (axes.length === 0 || (!leading && !trailing)) return fallback(args);
    const reduced = tf.util.sizeFromShape(axes.map((a) => x.shape[a]));
    const [outShape] = tf.backend_util.computeOutAndReduceShapes(x.shape, axes);
    const out = backend.makeOutput(
      keepDims ? tf.backend_util.expandShapeToKeepDim(outShape, axes) : outShape,
      'float32',
    );
    const [rows, cols] = leading ? [reduced, size / reduced] : [size / reduced, reduced];
    // after makeOutput: an allocation may have replaced the heap
    native.Sum(backend.wasm.HEAPU8, xOffset, heapOffset(backend, out)!, rows, cols, leading);
    return out;
  };
}
