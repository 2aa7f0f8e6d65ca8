import type { KernelBackend, KernelConfig, KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

/**
 * tfjs-backend-wasm 4.22's BatchMatMul is 10–25x slower when asked to transpose an operand
 * (x·Wᵀ for [32, 2048]·[2048, 2048]ᵀ: 202 ms, against 13 ms for the same product with the
 * transpose done apart). So transposes are done by the Transpose kernel and the product runs
 * untransposed, in whichever form moves fewer elements:
 *   direct:   op(A)·op(B), transposing A when transA and B when transB;
 *   swapped:  (op(B)ᵀ·op(A)ᵀ)ᵀ, transposing A when not transA, B when not transB, and C.
 * Linear layers (x·Wᵀ forward, dyᵀ·x for the weight gradient) take one path each.
 */
function untransposedMatMul(original: KernelFunc): KernelFunc {
  return (args) => {
    const { transposeA, transposeB } = args.attrs as unknown as tf.BatchMatMulAttrs;
    if (!transposeA && !transposeB) return original(args);
    const backend = args.backend as KernelBackend;
    const a = args.inputs.a as TensorInfo;
    const b = args.inputs.b as TensorInfo;
    const size = (t: TensorInfo) => tf.util.sizeFromShape(t.shape);
    const rows = (t: TensorInfo, trans: boolean) => t.shape[t.shape.length - (trans ? 1 : 2)];
    const cols = (t: TensorInfo, trans: boolean) => t.shape[t.shape.length - (trans ? 2 : 1)];
    const outSize = (size(a) / (rows(a, false) * cols(a, false))) * rows(a, transposeA) * cols(b, transposeB);
    const direct = (transposeA ? size(a) : 0) + (transposeB ? size(b) : 0);
    const swapped = (transposeA ? 0 : size(a)) + (transposeB ? 0 : size(b)) + outSize;
    const temps: TensorInfo[] = [];
    const keep = (t: TensorInfo) => {
      temps.push(t);
      return t;
    };
    const transpose = (x: TensorInfo) => {
      const perm = x.shape.map((_, i) => i);
      [perm[perm.length - 1], perm[perm.length - 2]] = [perm.length - 2, perm.length - 1];
      return (tf.getKernel('Transpose', 'wasm') as KernelConfig).kernelFunc({
        inputs: { x },
        attrs: { perm },
        backend,
      }) as TensorInfo;
    };
    const plain = { transposeA: false, transposeB: false };
    try {
      if (direct <= swapped) {
        const inputs = { a: transposeA ? keep(transpose(a)) : a, b: transposeB ? keep(transpose(b)) : b };
        return original({ inputs, attrs: plain, backend });
      }
      const inputs = { a: transposeB ? b : keep(transpose(b)), b: transposeA ? a : keep(transpose(a)) };
      return transpose(keep(original({ inputs, attrs: plain, backend }) as TensorInfo));
    } finally {
      for (const t of temps) backend.disposeData(t.dataId);
    }
  };
}

/** Replaces wasm's BatchMatMul with the untransposed form (its setup, which binds the wasm function, kept). */
export function registerUntransposedMatMul(): void {
  wrapKernel('BatchMatMul', 'wasm', untransposedMatMul);
}
