import type { KernelBackend, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';

/** The index of the first NaN along `axis` for every output position, or -1 where there is none. */
function firstNaNs(values: Float32Array, shape: number[], axis: number): Int32Array | null {
  const length = shape[axis];
  const inner = tf.util.sizeFromShape(shape.slice(axis + 1));
  const outer = tf.util.sizeFromShape(shape.slice(0, axis));
  let found: Int32Array | null = null;
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      for (let k = 0; k < length; k++) {
        if (!Number.isNaN(values[(o * length + k) * inner + i])) continue;
        found ??= new Int32Array(outer * inner).fill(-1);
        found[o * inner + i] = k;
        break;
      }
    }
  }
  return found;
}

/**
 * argMax/argMin as torch's over float input holding NaN: NaN is both the largest and the
 * smallest value, so the first NaN's index is the answer (torch.argmax([1, NaN, 3]) is 1).
 * tfjs skipped NaN on wasm and cpu alike and answered 2 — an accuracy over a diverged model's
 * NaN logits counted plausible classes. The scan runs only when the input holds a NaN.
 */
export function registerNaNIndices(): void {
  for (const backendName of ['wasm', 'cpu']) {
    for (const name of ['ArgMax', 'ArgMin']) {
      wrapKernel(name, backendName, (kernelFunc) => (args) => {
        const produced = kernelFunc(args) as TensorInfo;
        const x = args.inputs.x as TensorInfo;
        if (x.dtype !== 'float32') return produced;
        const backend = args.backend as KernelBackend;
        const values = backend.readSync(x.dataId) as Float32Array;
        if (!values.some(Number.isNaN)) return produced;
        const [axis] = tf.util.parseAxisParam(args.attrs?.axis as number | number[], x.shape);
        const nans = firstNaNs(values, x.shape, axis)!;
        const indices = Int32Array.from(backend.readSync(produced.dataId) as Int32Array);
        nans.forEach((k, i) => {
          if (k >= 0) indices[i] = k;
        });
        backend.disposeData(produced.dataId);
        return { ...produced, dataId: backend.write(indices, produced.shape, 'int32') };
      });
    }
  }
}
