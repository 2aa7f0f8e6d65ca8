import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';

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
  const copying = tf.getKernel('Identity', 'wasm') as KernelConfig | undefined;
  if (!copying) return;
  tf.unregisterKernel('Identity', 'wasm');
  tf.registerKernel({
    ...copying,
    kernelFunc: (args) => {
      const x = args.inputs.x as TensorInfo;
      // strings live outside the heap: wasm's kernel rebuilds them
      if (x.dtype === 'string') return copying.kernelFunc(args);
      (args.backend as unknown as RefCounting).incRef(x.dataId);
      return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
    },
  });
}
