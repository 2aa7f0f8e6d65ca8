import type { KernelBackend, KernelConfig, NamedTensorInfoMap, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

type KernelArgs = Parameters<KernelConfig['kernelFunc']>[0];

/** `kernel` (a cpu one) as a wasm kernel: inputs copied to the cpu backend, outputs back, cpu intermediates freed. */
export function runOnCpu(kernel: KernelConfig): KernelConfig['kernelFunc'] {
  return ({ inputs, attrs, backend }) => {
    const wasm = backend as KernelBackend;
    const cpu = tf.findBackend('cpu');
    if (!cpu) throw new Error(`the cpu backend is needed to run ${kernel.kernelName} for wasm`);
    // its first write prints tfjs's "install tfjs-node" banner, meant for a user's backend, not a helper's
    (cpu as unknown as { firstUse: boolean }).firstUse = false;
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

/** Replaces wasm's `name` kernel outright by cpu's, run on copies (a kernel wasm computes wrongly for every input). */
export function replaceWithCpu(name: string): void {
  const cpu = tf.getKernel(name, 'cpu') as KernelConfig | undefined;
  if (!cpu || !tf.getKernel(name, 'wasm')) return;
  tf.unregisterKernel(name, 'wasm');
  tf.registerKernel({ kernelName: name, backendName: 'wasm', kernelFunc: runOnCpu(cpu) });
}

/**
 * Wraps wasm's `name` kernel: the calls `when` picks run cpu's kernel on copies (a case wasm computes
 * wrongly), the others stay on wasm. Nothing when cpu lacks the kernel.
 */
export function runOnCpuWhen(name: string, when: (args: KernelArgs) => boolean): void {
  const cpu = tf.getKernel(name, 'cpu') as KernelConfig | undefined;
  if (!cpu) return;
  const onCpu = runOnCpu(cpu);
  wrapKernel(name, 'wasm', (onWasm) => (args) => (when(args) ? onCpu(args) : onWasm(args)));
}

/** Whether an input of the call passes `test`; no allocation (kernels a training step runs often: Sub, Mul). */
export function someInput(args: KernelArgs, test: (t: TensorInfo, name: string) => boolean): boolean {
  for (const name in args.inputs) {
    const t = args.inputs[name] as TensorInfo | undefined;
    if (t !== undefined && test(t, name)) return true;
  }
  return false;
}
