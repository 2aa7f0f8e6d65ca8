import type { DataType, KernelBackend, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { EmptyReductionError } from './errors.js';
import { wrapKernel } from './kernel-wrap.js';

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

/** Index reductions, which have no answer over an empty dim: torch raises, tfjs returned index 0. */
const INDEX_REDUCTIONS = { ArgMax: 'argMax', ArgMin: 'argMin' } as const;

/** The kernels' output dtype: a mean is float, sums and products of bool count in int32, the rest keep x's. */
function outputDtype(name: string, dtype: DataType): DataType {
  if (name === 'Mean') return 'float32';
  return name === 'Sum' || name === 'Prod' ? tf.upcastType(dtype, 'int32') : dtype;
}

/**
 * Reductions of an empty input, made torch's on wasm and cpu, without running the kernel.
 * tfjs-wasm 4.22 left a non-empty output unwritten (a sum returned what the heap held there:
 * 3.6e-41, or a stale value of an earlier tensor), and trapped ("divide by zero") in the transpose
 * it runs first when the reduced axes are not the innermost; tfjs-cpu's mean is 0 and its max NaN.
 * The output is EMPTY_VALUE throughout. argMax/argMin over an empty dim returned index 0 on both,
 * a row that does not exist: they raise EmptyReductionError as torch raises.
 */
export function registerEmptyReductions(): void {
  for (const backendName of ['wasm', 'cpu']) {
    for (const [name, valueFor] of Object.entries(EMPTY_VALUE)) {
      wrapKernel(name, backendName, (kernelFunc) => (args) => {
        const x = args.inputs.x as TensorInfo;
        if (tf.util.sizeFromShape(x.shape) > 0) return kernelFunc(args);
        const attrs = args.attrs as unknown as tf.SumAttrs & tf.MaxAttrs;
        // Max names its axes reductionIndices, the others axis
        const axes = tf.util.parseAxisParam(name === 'Max' ? attrs.reductionIndices : attrs.axis, x.shape);
        const [reducedShape] = tf.backend_util.computeOutAndReduceShapes(x.shape, axes);
        const shape = attrs.keepDims ? tf.backend_util.expandShapeToKeepDim(reducedShape, axes) : reducedShape;
        const dtype = outputDtype(name, x.dtype);
        const values = tf.util.getTypedArrayFromDType(dtype as 'float32', tf.util.sizeFromShape(shape));
        values.fill(valueFor(dtype));
        return { dataId: (args.backend as KernelBackend).write(values, shape, dtype), shape, dtype };
      });
    }
    for (const [name, op] of Object.entries(INDEX_REDUCTIONS)) {
      wrapKernel(name, backendName, (kernelFunc) => (args) => {
        const { shape } = args.inputs.x as TensorInfo;
        for (const dim of tf.util.parseAxisParam(args.attrs?.axis as number | number[], shape)) {
          if (shape[dim] === 0) {
            throw new EmptyReductionError(
              `${op}: dim ${dim} of the input [${shape}] is empty, so there is no index to return (torch raises too)`,
            );
          }
        }
        return kernelFunc(args);
      });
    }
  }
}
