import type { KernelBackend, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { wrapKernel } from './kernel-wrap.js';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

/** Above this many terms per output a float32 running total loses digits torch keeps. */
const EXACT_TERMS = 1024;

/**
 * Σ of x over `axes` in double. The shape is collapsed into runs of kept or reduced dims; the
 * innermost run is walked contiguously, the outer ones with a coordinate counter.
 */
export function sumInDouble(x: ArrayLike<number>, shape: readonly number[], axes: readonly number[]): Float64Array {
  const dims: { size: number; reduced: boolean }[] = [];
  shape.forEach((size, d) => {
    const reduced = axes.includes(d);
    const last = dims.at(-1);
    if (size === 1) return;
    if (last && last.reduced === reduced) last.size *= size;
    else dims.push({ size, reduced });
  });
  const outSize = dims.reduce((n, d) => (d.reduced ? n : n * d.size), 1);
  const out = new Float64Array(outSize);
  const inner = dims.pop() ?? { size: 1, reduced: true };
  // the output's stride of each outer dim (0 for a reduced one)
  const strides = dims.map(() => 0);
  let stride = inner.reduced ? 1 : inner.size;
  for (let d = dims.length - 1; d >= 0; d--) {
    if (dims[d].reduced) continue;
    strides[d] = stride;
    stride *= dims[d].size;
  }
  const coords = dims.map(() => 0);
  let outIndex = 0;
  for (let i = 0; i < x.length; i += inner.size) {
    if (inner.reduced) {
      let total = 0;
      for (let j = 0; j < inner.size; j++) total += x[i + j];
      out[outIndex] += total;
    } else {
      for (let j = 0; j < inner.size; j++) out[outIndex + j] += x[i + j];
    }
    for (let d = dims.length - 1; d >= 0; d--) {
      outIndex += strides[d];
      if (++coords[d] < dims[d].size) break;
      outIndex -= strides[d] * dims[d].size;
      coords[d] = 0;
    }
  }
  return out;
}

/**
 * Sum and Mean of float32 over more than EXACT_TERMS terms per output, in double on wasm.
 * tfjs-wasm 4.22 keeps a float32 running total, which stops growing at 2^24: the mean of 40 M
 * ones was 0.42, and a loss averaged over a large batch drifted, silently. tfjs-cpu already
 * totals in JS doubles; the native Sum (reduce.cc) in C++ doubles.
 */
export function registerLongSums(): void {
  for (const name of ['Sum', 'Mean']) {
    wrapKernel(name, 'wasm', (kernelFunc) => (args) => {
      const x = args.inputs.x as TensorInfo;
      const axes = tf.util.parseAxisParam(args.attrs?.axis as number | number[], x.shape);
      const terms = tf.util.sizeFromShape(axes.map((a) => x.shape[a]));
      if (x.dtype !== 'float32' || terms <= EXACT_TERMS) return kernelFunc(args);
      const backend = args.backend as KernelBackend;
      const wasm = asWasmBackend(backend);
      const offset = wasm ? heapOffset(wasm, x) : null;
      const size = tf.util.sizeFromShape(x.shape);
      const values =
        wasm && offset !== null
          ? new Float32Array(wasm.wasm.HEAPU8.buffer, offset, size)
          : (backend.readSync(x.dataId) as Float32Array);
      const totals = sumInDouble(values, x.shape, axes);
      const result = Float32Array.from(totals, (t) => (name === 'Mean' ? t / terms : t));
      const [outShape] = tf.backend_util.computeOutAndReduceShapes(x.shape, axes);
      const keepDims = args.attrs?.keepDims === true;
      const shape = keepDims ? tf.backend_util.expandShapeToKeepDim(outShape, axes) : outShape;
      return { dataId: backend.write(result, shape, 'float32'), shape, dtype: 'float32' };
    });
  }
}
