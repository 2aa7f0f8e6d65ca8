import type * as tf from '@tensorflow/tfjs-core';
import type { TensorInfo } from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

interface RefCounting {
  incRef(dataId: tf.DataId): void;
}

/**
 * Identity (`tf.clone`) on wasm as the cpu backend has it: the clone shares the input's data
 * and counts one more reference (as wasm's own Reshape does) instead of copying it. No kernel
 * writes into its inputs, so a shared buffer is indistinguishable from a copy; autograd clones
 * every tensor it saves for backward, and those copies took ~2 ms of a CLIP step.
 */
export function registerSharingIdentity(): void {
  wrapKernel('Identity', 'wasm', (copying) => (args) => {
    const x = args.inputs.x as TensorInfo;
    // strings live outside the heap: wasm's kernel rebuilds them
    if (x.dtype === 'string') return copying(args);
    (args.backend as unknown as RefCounting).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  });
}
