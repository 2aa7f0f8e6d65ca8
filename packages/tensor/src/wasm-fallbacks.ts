import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { registerBatchBroadcast } from './batch-broadcast.js';
import { registerConvFilterGrad } from './conv-filter-grad.js';
import { registerEmptyOnCpu, registerEmptyOperands } from './empty-operands.js';
import { registerEmptyReductions } from './empty-reductions.js';
import { registerHighRankFallbacks } from './high-rank.js';
import { registerIndexBounds } from './index-bounds.js';
import { registerLongSums } from './long-sums.js';
import { registerNaNIndices } from './nan-indices.js';
import { registerExplicitPadding } from './numeric-padding.js';
import { replaceWithCpu, runOnCpu, runOnCpuWhen } from './run-on-cpu.js';
import { registerDtypeFallbacks } from './wasm-dtypes.js';
import { registerSharingIdentity } from './wasm-identity.js';
import { registerUntransposedMatMul } from './wasm-matmul.js';

/**
 * Kernels the cpu backend has and the wasm backend lacks, which training needs: the gather
 * (embedding) gradient and the depthwise gradients. On wasm they run on the cpu backend:
 * inputs are copied over, outputs copied back, cpu intermediates freed. The conv2d weight
 * gradient gets a faster form on both backends (conv-filter-grad.ts), wasm's matmul a
 * faster route for transposed operands (wasm-matmul.ts), matmuls torch's batch broadcasting
 * (batch-broadcast.ts), wasm's clone no copy (wasm-identity.ts),
 * reductions over an empty dim torch's value or error on wasm and cpu (empty-reductions.ts), long
 * sums totalled in double (long-sums.ts), indices outside a raw op's input refused (index-bounds.ts),
 * XNNPACK's kernels above rank 6 on cpu (high-rank.ts).
 */
const NEEDED_ON_WASM = [
  'DepthwiseConv2dNativeBackpropFilter',
  'DepthwiseConv2dNativeBackpropInput',
  'UnsortedSegmentSum',
] as const;

/**
 * Kernels tfjs-wasm 4.22 has but computes wrongly, replaced by the cpu backend's: Sign is 0 for
 * |x| < ~1e-6 (so abs's gradient was 0 for small weights); Relu6 and ClipByValue turn NaN into
 * a bound (hiding a diverged value, where torch's clamp keeps NaN), and Maximum and Minimum drop
 * a NaN second operand (maximum(1, NaN) = 1; torch's is NaN); Log1p and Sin lose every digit
 * near 0 (log1p(1e-30) = 0, sin(-1e-7) = -3e-7). A cast to bool is cpu's too (below).
 */
const WRONG_ON_WASM = ['Sign', 'Relu6', 'ClipByValue', 'Maximum', 'Minimum', 'Log1p', 'Sin'] as const;

/**
 * tfjs-wasm's Cast to bool truncates to a byte: 0.5 and 1e-7 became false, 2.5 became 2 and
 * -2.5 254 (a bool tensor holding 254). Those casts run on cpu (x ≠ 0, NaN true, as torch's
 * bool()); every other cast stays on wasm.
 */
function registerBoolCast(): void {
  runOnCpuWhen('Cast', (args) => args.attrs?.dtype === 'bool' && (args.inputs.x as TensorInfo).dtype !== 'bool');
}

let registered = false;

/**
 * Registers the cpu versions of NEEDED_ON_WASM for the wasm backend, the fast conv filter gradient and matmul (once).
 */
export function registerWasmFallbacks(): void {
  if (registered) return;
  registered = true;
  registerExplicitPadding('cpu');
  registerExplicitPadding('wasm');
  const cpuFilterGrad = tf.getKernel('Conv2DBackpropFilter', 'cpu') as KernelConfig;
  registerConvFilterGrad('cpu', cpuFilterGrad.kernelFunc);
  registerConvFilterGrad('wasm', runOnCpu(cpuFilterGrad));
  registerUntransposedMatMul();
  registerBatchBroadcast();
  registerSharingIdentity();
  registerEmptyReductions();
  registerLongSums();
  registerEmptyOperands();
  registerEmptyOnCpu();
  registerNaNIndices();
  for (const name of WRONG_ON_WASM) replaceWithCpu(name);
  registerBoolCast();
  registerDtypeFallbacks();
  registerIndexBounds();
  registerHighRankFallbacks();
  const onWasm = new Set(tf.getKernelsForBackend('wasm').map((k) => k.kernelName));
  for (const kernel of tf.getKernelsForBackend('cpu')) {
    if (!(NEEDED_ON_WASM as readonly string[]).includes(kernel.kernelName) || onWasm.has(kernel.kernelName)) continue;
    tf.registerKernel({ kernelName: kernel.kernelName, backendName: 'wasm', kernelFunc: runOnCpu(kernel) });
  }
}
