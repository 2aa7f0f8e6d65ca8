import type { NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

/**
 * Exp of float32 through the addon (glibc's expf: ~5× tfjs-wasm's scalar loop, which took
 * 0.8 ms of a CLIP step); other dtypes go to `fallback`. Relu, Step, Add, Sub and Multiply were
 * measured too and left to tfjs-wasm: memory-bound, as fast there (0.26–0.28 ms per 803 K values).
 */
export function nativeExp(native: NativeKernels, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const backend = asWasmBackend(args.backend);
    const x = args.inputs.x as TensorInfo;
    const xOffset = backend && x.dtype === 'float32' ? heapOffset(backend, x) : null;
    if (!backend || xOffset === null) return fallback(args);
    const out = makeAlignedOutput(backend, x.shape);
    // after makeOutput: an allocation may have replaced the heap
    native.Exp(backend.wasm.HEAPU8, xOffset, heapOffset(backend, out)!, tf.util.sizeFromShape(x.shape));
    return out;
  };
}
