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

/**
 * Reductions over an empty dim, made torch's on wasm and cpu. tfjs-wasm 4.22 leaves the output
 * unwritten (a sum returned what the heap held there: 3.6e-41, or a stale value of an earlier
 * tensor); tfjs-cpu's mean is 0 and its max NaN. When the input is empty and the output is not,
 * the output is filled with EMPTY_VALUE. argMax/argMin over an empty dim returned index 0 on
 * both, a row that does not exist: they raise EmptyReductionError as torch raises.
 */
export function registerEmptyReductions(): void {
  for (const backendName of ['wasm', 'cpu']) {
    for (const [name, valueFor] of Object.entries(EMPTY_VALUE)) {
      wrapKernel(name, backendName, (kernelFunc) => (args) => {
        const produced = kernelFunc(args) as TensorInfo;
        const x = args.inputs.x as TensorInfo;
        const outSize = tf.util.sizeFromShape(produced.shape);
        if (tf.util.sizeFromShape(x.shape) > 0 || outSize === 0) return produced;
        const backend = args.backend as KernelBackend;
        const values = tf.util.getTypedArrayFromDType(produced.dtype as 'float32', outSize);
        values.fill(valueFor(produced.dtype));
        backend.disposeData(produced.dataId);
        return { ...produced, dataId: backend.write(values, produced.shape, produced.dtype) };
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
