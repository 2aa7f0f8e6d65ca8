import type { KernelBackend, KernelConfig, NamedTensorInfoMap, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { registerConvFilterGrad } from './conv-filter-grad.js';
import { registerEmptyReductions } from './empty-reductions.js';
import { registerSharingIdentity } from './wasm-identity.js';
import { registerUntransposedMatMul } from './wasm-matmul.js';

/**
 * Kernels the cpu backend has and the wasm backend lacks, which training needs: the gather
 * (embedding) gradient and the depthwise gradients. On wasm they run on the cpu backend:
 * inputs are copied over, outputs copied back, cpu intermediates freed. The conv2d weight
 * gradient gets a faster form on both backends (conv-filter-grad.ts), wasm's matmul a
 * faster route for transposed operands (wasm-matmul.ts), its clone no copy (wasm-identity.ts),
 * reductions over an empty dim torch's value or error on wasm and cpu (empty-reductions.ts).
 */
const NEEDED_ON_WASM = [
  'DepthwiseConv2dNativeBackpropFilter',
  'DepthwiseConv2dNativeBackpropInput',
  'UnsortedSegmentSum',
] as const;

function runOnCpu(kernel: KernelConfig): KernelConfig['kernelFunc'] {
  return ({ inputs, attrs, backend }) => {
    const wasm = backend as KernelBackend;
    const cpu = tf.findBackend('cpu');
    if (!cpu) throw new Error(`the cpu backend is needed to run ${kernel.kernelName} for wasm`);
    const cpuInputs: NamedTensorInfoMap = {};
    for (const [name, info] of Object.entries(inputs)) {
      if (!info) continue;
      cpuInputs[name] = { ...info, dataId: cpu.write(wasm.readSync(info.dataId), info.shape, info.dtype) };
    }
    const produced = kernel.kernelFunc({ inputs: cpuInputs, attrs, backend: cpu });
    const outputs = Array.isArray(produced) ? produced : [produced];
    const copied: TensorInfo[] = outputs.map((o) => ({
      ...o,
      dataId: wasm.write(cpu.readSync(o.dataId), o.shape, o.dtype),
    }));
    for (const info of [...Object.values(cpuInputs), ...outputs]) if (info) cpu.disposeData(info.dataId, true);
    return Array.isArray(produced) ? copied : (copied[0] as TensorInfo);
  };
}

let registered = false;

/**
 * Registers the cpu versions of NEEDED_ON_WASM for the wasm backend, the fast conv filter gradient and matmul (once).
 */
export function registerWasmFallbacks(): void {
  if (registered) return;
  registered = true;
  const cpuFilterGrad = tf.getKernel('Conv2DBackpropFilter', 'cpu') as KernelConfig;
  registerConvFilterGrad('cpu', cpuFilterGrad.kernelFunc);
  registerConvFilterGrad('wasm', runOnCpu(cpuFilterGrad));
  registerUntransposedMatMul();
  registerSharingIdentity();
  registerEmptyReductions();
  const onWasm = new Set(tf.getKernelsForBackend('wasm').map((k) => k.kernelName));
  for (const kernel of tf.getKernelsForBackend('cpu')) {
    if (!(NEEDED_ON_WASM as readonly string[]).includes(kernel.kernelName) || onWasm.has(kernel.kernelName)) continue;
    tf.registerKernel({ kernelName: kernel.kernelName, backendName: 'wasm', kernelFunc: runOnCpu(kernel) });
  }
}
