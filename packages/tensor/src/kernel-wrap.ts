import type { KernelConfig } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';

type KernelFunc = KernelConfig['kernelFunc'];

/**
 * Replaces the kernel `name` registered for `backend` by `wrap(itsKernelFunc)`, keeping its
 * gradient and setup; nothing when the backend has no such kernel. The corrections that make
 * tfjs's kernels torch's (empty operands, NaN indices, long sums) all go through here, so a
 * later wrapper (the native kernels) wraps the corrected kernel.
 */
export function wrapKernel(name: string, backend: string, wrap: (kernelFunc: KernelFunc) => KernelFunc): void {
  const kernel = tf.getKernel(name, backend) as KernelConfig | undefined;
  if (!kernel) return;
  tf.unregisterKernel(name, backend);
  tf.registerKernel({ ...kernel, kernelFunc: wrap(kernel.kernelFunc) });
}
