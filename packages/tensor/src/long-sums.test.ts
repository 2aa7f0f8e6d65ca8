import { describe, expect, it } from 'vitest';
import { setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

/** Σ over axis `axis` of a [a, b, c] array, in double: the reference. */
function reference(x: Float32Array, [a, b, c]: number[], axis: number): number[] {
  const out = new Float64Array(axis === 0 ? b * c : axis === 1 ? a * c : a * b);
  for (let i = 0; i < a; i++) {
    for (let j = 0; j < b; j++) {
      for (let k = 0; k < c; k++) {
        const o = axis === 0 ? j * c + k : axis === 1 ? i * c + k : i * b + j;
        out[o] += x[(i * b + j) * c + k];
      }
    }
  }
  return Array.from(out);
}

describe.each(BACKEND_PATHS)('sums over many terms on %s (native kernels: %s)', (backend, withNative) => {
  it.skipIf(withNative && !native)('total in double as torch, not in a float32 running total', async () => {
    await setBackend(backend);
    useNativeKernels(withNative);
    const before = tf.memory().numTensors;
    const tenths = tf.fill([1_000_000], 0.1);
    const ones = tf.ones([3, 2 ** 24 / 2 + 5]);
    const got = tf.tidy(() => ({
      // a float32 running total of a million 0.1 reaches 100958
      sum: values(tf.sum(tenths))[0],
      mean: values(tf.mean(tenths))[0],
      // past 2^24 a float32 total stops growing: the mean of these rows was ~0.5
      rowMeans: values(tf.mean(ones, 1)),
      rowSumsKept: tf.sum(ones, -1, true).shape,
      allMean: values(tf.mean(ones))[0],
    }));
    expect(got.sum).toBeCloseTo(100_000, 1);
    expect(got.mean).toBeCloseTo(0.1, 6);
    expect(got.rowMeans).toEqual([1, 1, 1]);
    expect(got.rowSumsKept).toEqual([3, 1]);
    expect(got.allMean).toBe(1);
    tf.dispose([tenths, ones]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it.skipIf(withNative && !native)('over leading, middle and trailing dims of a 3-d tensor', async () => {
    await setBackend(backend);
    useNativeKernels(withNative);
    const shape = [40, 1500, 3];
    const data = Float32Array.from({ length: 40 * 1500 * 3 }, (_, i) => Math.fround(Math.sin(i) * 1000 + 0.1));
    const x = tf.tensor3d(data, shape as [number, number, number]);
    for (const axis of [0, 1, 2]) {
      const got = tf.tidy(() => values(tf.sum(x, axis)));
      const want = reference(data, shape, axis);
      for (const [i, v] of got.entries()) expect(v).toBeCloseTo(Math.fround(want[i]), 1);
    }
    // column sums of 4500 rows (a bias gradient over a large batch)
    const columns = tf.tidy(() => values(tf.sum(tf.reshape(x, [4500, 40]), 0)));
    const want = reference(data, [1, 4500, 40], 1);
    for (const [i, v] of columns.entries()) expect(v).toBeCloseTo(Math.fround(want[i]), 1);
    x.dispose();
  });
});
