import { describe, expect, it } from 'vitest';
import { moments, setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

/** Deterministic values 1e4 + u, u in [−1, 1): channels far from zero, as a feature map after a large bias. */
function farFromZero(size: number): Float32Array {
  let seed = 12345;
  return Float32Array.from({ length: size }, () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return 1e4 + (seed / 2 ** 30 - 1);
  });
}

/** Per-channel mean and biased variance of an NCHW array, in double: the reference. */
function channelMoments(x: Float32Array, [n, c, h, w]: number[]) {
  const mean = new Float64Array(c);
  const variance = new Float64Array(c);
  const at = (i: number, ch: number, p: number) => x[(i * c + ch) * h * w + p];
  for (let ch = 0; ch < c; ch++) {
    for (let i = 0; i < n; i++) for (let p = 0; p < h * w; p++) mean[ch] += at(i, ch, p);
    mean[ch] /= n * h * w;
    for (let i = 0; i < n; i++) for (let p = 0; p < h * w; p++) variance[ch] += (at(i, ch, p) - mean[ch]) ** 2;
    variance[ch] /= n * h * w;
  }
  return { mean, variance };
}

describe.each(BACKEND_PATHS)('moments on %s (native kernels: %s)', (backend, withNative) => {
  it.skipIf(withNative && !native)(
    'of channels far from zero: the mean to an ulp, so the variance is right',
    async () => {
      await setBackend(backend);
      useNativeKernels(withNative);
      const shape = [16, 3, 6, 6];
      const data = farFromZero(16 * 3 * 36);
      const want = channelMoments(data, shape);
      const x = tf.tensor(data, shape);
      const before = tf.memory().numTensors;
      const kept = moments(x, [0, 2, 3], true);
      const flat = moments(x, [0, 2, 3]);
      expect([kept.mean.shape, kept.variance.shape, flat.mean.shape]).toEqual([[1, 3, 1, 1], [1, 3, 1, 1], [3]]);
      const ulp = 2 ** -10; // float32's spacing at 1e4
      // tf.moments on wasm: the mean 5–10 ulps off, and BatchNorm's y 8× torch's error
      const offBy = values(flat.mean).map((m, ch) => Math.abs(m - want.mean[ch]));
      expect(Math.max(...offBy)).toBeLessThanOrEqual(ulp);
      expect(values(flat.variance).map((v, ch) => v - want.variance[ch])).toEqual(
        [0, 0, 0].map(() => expect.closeTo(0, 4)),
      );
      tf.dispose([kept.mean, kept.variance, flat.mean, flat.variance]);
      expect(tf.memory().numTensors).toBe(before);
      x.dispose();
    },
  );
});
