import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { nativeKernels, replacedKernels } from './native-kernels.js';
import { activeWasmBackend, heapOffset } from './wasm-heap.js';

/** The scalars of one Adam(W) step (torch.optim's names), as JavaScript numbers. */
export interface AdamScalars {
  /** p ← p·decay first (AdamW's decoupled weight decay; 1 for none). */
  decay: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** lr / (1 − beta1^step) */
  stepSize: number;
  /** √(1 − beta2^step) */
  sqrtBiasCorrection2: number;
}

/**
 * One Adam(W) update of a float32 parameter in one native pass, with the same float32 results
 * as @ddp/nn's tfjs version: new [param, expAvg, expAvgSq], or null where the native kernels
 * are off or the tensors are not float32 on the wasm heap (the caller runs its tfjs version).
 */
export function fusedAdamStep(
  param: tf.Tensor,
  grad: tf.Tensor,
  expAvg: tf.Tensor,
  expAvgSq: tf.Tensor,
  s: AdamScalars,
): [tf.Tensor, tf.Tensor, tf.Tensor] | null {
  const native = nativeKernels();
  const backend = replacedKernels() > 0 ? activeWasmBackend() : null;
  const inputs = [param, grad, expAvg, expAvgSq];
  if (!native || !backend || inputs.some((t) => t.dtype !== 'float32' || !tf.util.arraysEqual(t.shape, param.shape)))
    return null;
  const offsets = inputs.map((t) => heapOffset(backend, t));
  if (offsets.some((o) => o === null)) return null;
  const outs = inputs.slice(0, 3).map(() => makeAlignedOutput(backend, param.shape));
  // after makeOutput: an allocation may have replaced the heap
  const [p, m, v] = outs.map((o) => heapOffset(backend, o)!) as [number, number, number];
  const [po, go, mo, vo] = offsets as [number, number, number, number];
  native.AdamStep(
    backend.wasm.HEAPU8,
    po,
    go,
    mo,
    vo,
    p,
    m,
    v,
    param.size,
    s.decay,
    1 - s.beta1,
    s.beta2,
    1 - s.beta2,
    s.sqrtBiasCorrection2,
    s.eps,
    s.stepSize,
  );
  return outs.map((o) => tf.engine().makeTensorFromTensorInfo(o)) as [tf.Tensor, tf.Tensor, tf.Tensor];
}
