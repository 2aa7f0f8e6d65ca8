import type { DataType, KernelBackend, KernelConfig, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';

/**
 * What a reduction over no element gives: torch's sum 0, prod 1, mean NaN, any false, all
 * true; max and min the identity of the reduction (−∞ / +∞ for floats, so logSumExp of an
 * empty dim is −∞ as torch's).
 */
const EMPTY_VALUE: Record<string, (dtype: DataType) => number> = {
  Sum: () => 0,
  Prod: () => 1,
  Mean: () => Number.NaN,
  Any: () => 0,
  All: () => 1,
  Max: (dtype) => (dtype === 'int32' ? -(2 ** 31) : Number.NEGATIVE_INFINITY),
  Min: (dtype) => (dtype === 'int32' ? 2 ** 31 - 1 : Number.POSITIVE_INFINITY),
};

/**
 * tfjs-wasm 4.22's reductions leave their output unwritten when they reduce no element: a sum
 * over an empty dim returned whatever the heap held there (3.6e-41, or a stale value of an
 * earlier tensor), so the loss of an empty batch was garbage. Each is wrapped: when the input
 * is empty and the output is not, the output is filled with EMPTY_VALUE.
 */
export function registerEmptyReductions(): void {
  for (const [name, valueFor] of Object.entries(EMPTY_VALUE)) {
    const kernel = tf.getKernel(name, 'wasm') as KernelConfig | undefined;
    if (!kernel) continue;
    tf.unregisterKernel(name, 'wasm');
    tf.registerKernel({
      ...kernel,
      kernelFunc: (args) => {
        const produced = kernel.kernelFunc(args) as TensorInfo;
        const x = args.inputs.x as TensorInfo;
        const outSize = tf.util.sizeFromShape(produced.shape);
        if (tf.util.sizeFromShape(x.shape) > 0 || outSize === 0) return produced;
        const backend = args.backend as KernelBackend;
        const values = tf.util.getTypedArrayFromDType(produced.dtype as 'float32', outSize);
        values.fill(valueFor(produced.dtype));
        backend.disposeData(produced.dataId);
        return { ...produced, dataId: backend.write(values, produced.shape, produced.dtype) };
      },
    });
  }
}
