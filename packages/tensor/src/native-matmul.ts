import type { NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

/**
 * BatchMatMul on the wasm heap through the addon's cblas_sgemm: inputs read and the output
 * written in place, every transpose form folded into the BLAS call. Batch dims broadcast as
 * tfjs's kernels do (equal batch sizes, or one side's batch is 1); anything else (other
 * dtypes, batch shapes tfjs's own kernel would mis-handle, shape errors) goes to `fallback`,
 * which keeps tfjs's behaviour, errors included.
 */
export function nativeBatchMatMul(native: NativeKernels, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const backend = asWasmBackend(args.backend);
    const a = args.inputs.a as TensorInfo;
    const b = args.inputs.b as TensorInfo;
    const { transposeA, transposeB } = args.attrs as unknown as tf.BatchMatMulAttrs;
    if (!backend || a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2)
      return fallback(args);
    const aOffset = heapOffset(backend, a);
    const bOffset = heapOffset(backend, b);
    const [ar, ac] = a.shape.slice(-2) as [number, number];
    const [br, bc] = b.shape.slice(-2) as [number, number];
    const [m, k] = transposeA ? [ac, ar] : [ar, ac];
    const [kb, n] = transposeB ? [bc, br] : [br, bc];
    const batchA = tf.util.sizeFromShape(a.shape.slice(0, -2));
    const batchB = tf.util.sizeFromShape(b.shape.slice(0, -2));
    const batch = Math.max(batchA, batchB);
    if (aOffset === null || bOffset === null || k !== kb || (batchA !== batchB && batchA !== 1 && batchB !== 1))
      return fallback(args);
    const outer = tf.backend_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
    // an empty product (a batch of 0, MultiheadAttention on no rows): BLAS refuses its zero strides
    if (tf.util.sizeFromShape(outer) !== batch || m * n * k * batch === 0) return fallback(args);
    const out = makeAlignedOutput(backend, [...outer, m, n]);
    // after makeOutput: an allocation may have grown (replaced) the heap
    const heap = backend.wasm.HEAPU8;
    const strideA = batchA === 1 ? 0 : m * k;
    const strideB = batchB === 1 ? 0 : k * n;
    native.BatchMatMul(
      heap,
      aOffset,
      bOffset,
      heapOffset(backend, out)!,
      batch,
      m,
      n,
      k,
      transposeA,
      transposeB,
      strideA,
      strideB,
    );
    return out;
  };
}
