import * as tf from '@tensorflow/tfjs-core';
import { countTransfer } from './storage.js';
import { activeWasmBackend, heapOffset } from './wasm-heap.js';

/** What the cpu backend keeps per tensor (internals of tfjs 4.x, checked at run time). */
interface CpuBackend {
  data: { get(id: object): { values?: unknown } | undefined };
}

/**
 * Copies a float32 tensor's values into `target` at `offset`: one copy straight out of the
 * backend's memory on wasm and cpu (dataSync would allocate and copy once more), dataSync
 * elsewhere. The hot path of gradient bucketing.
 */
export function copyTensorInto(t: tf.Tensor, target: Float32Array, offset = 0): void {
  if (t.dtype !== 'float32') throw new TypeError(`copyTensorInto: expected a float32 tensor, got ${t.dtype}`);
  if (offset < 0 || offset + t.size > target.length) {
    throw new RangeError(`copyTensorInto: ${t.size} values at offset ${offset} do not fit in ${target.length}`);
  }
  countTransfer('copiedOut', t.size);
  const wasm = activeWasmBackend();
  const onWasm = wasm && heapOffset(wasm, t);
  if (wasm && onWasm !== null) {
    target.set(new Float32Array(wasm.wasm.HEAPU8.buffer, onWasm, t.size), offset);
    return;
  }
  const onCpu =
    tf.getBackend() === 'cpu' ? (tf.backend() as unknown as CpuBackend).data.get(t.dataId)?.values : undefined;
  target.set(onCpu instanceof Float32Array && onCpu.length === t.size ? onCpu : (t.dataSync() as Float32Array), offset);
}

/**
 * A float32 tensor holding a copy of `values` (which may be a view into a larger, reused
 * buffer). On wasm the backend's own upload is the copy; other backends may keep the array
 * they are given, so they get a private copy.
 */
export function tensorFromFloat32(values: Float32Array, shape: readonly number[]): tf.Tensor {
  countTransfer('uploaded', values.length);
  return tf.tensor(activeWasmBackend() ? values : values.slice(), [...shape], 'float32');
}
