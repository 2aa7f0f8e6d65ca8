import type { KernelBackend, KernelConfig, KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

/**
 * tfjs 4.22's BatchMatMul flattens the batch dims, so it pairs the right batches only when an
 * operand's batch shape is the broadcast one or holds one matrix: [2,1,2,3]·[1,3,3,2],
 * [2,1,2,3]·[2,3,2] and [1,2,2,3]·[2,1,3,2] gave other products than torch's, silently, on every
 * backend. Such an operand is expanded to the broadcast batch shape first (Reshape, Tile).
 */
function broadcastBatches(backendName: string, original: KernelFunc): KernelFunc {
  return (args) => {
    const { a, b } = args.inputs as { a: TensorInfo; b: TensorInfo };
    if (a.shape.length < 2 || b.shape.length < 2) return original(args);
    let outer: number[];
    try {
      outer = tf.backend_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
    } catch {
      return original(args); // tfjs's own error
    }
    const padded = (t: TensorInfo) => [...Array(outer.length + 2 - t.shape.length).fill(1), ...t.shape];
    const paired = (t: TensorInfo) =>
      tf.util.sizeFromShape(t.shape.slice(0, -2)) === 1 ||
      padded(t)
        .slice(0, -2)
        .every((d, i) => d === outer[i]);
    if (paired(a) && paired(b)) return original(args);
    const backend = args.backend as KernelBackend;
    const temps: TensorInfo[] = [];
    const run = (name: string, x: TensorInfo, attrs: object) => {
      const kernel = tf.getKernel(name, backendName) as KernelConfig;
      const out = kernel.kernelFunc({ inputs: { x }, attrs: attrs as never, backend }) as TensorInfo;
      temps.push(out);
      return out;
    };
    const expand = (t: TensorInfo) => {
      if (paired(t)) return t;
      const shape = padded(t);
      const reps = shape.map((d, i) => (i < outer.length && d === 1 ? outer[i] : 1));
      return run('Tile', run('Reshape', t, { shape }), { reps });
    };
    try {
      return original({ ...args, inputs: { a: expand(a), b: expand(b) } });
    } finally {
      for (const t of temps) backend.disposeData(t.dataId);
    }
  };
}

/** Wraps BatchMatMul on wasm and cpu (before the native kernels wrap it, which hand it these shapes). */
export function registerBatchBroadcast(): void {
  for (const backend of ['wasm', 'cpu']) wrapKernel('BatchMatMul', backend, (k) => broadcastBatches(backend, k));
}
