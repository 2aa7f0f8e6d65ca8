import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

const n = Number.NaN;
const ints = (t: tf.Tensor) => Array.from(t.dataSync() as ArrayLike<number>);

describe.each(['wasm', 'cpu'] as const)('argMax / argMin over NaN on %s', (backend) => {
  it("answer the first NaN's index, as torch (NaN is the largest and the smallest value)", async () => {
    await setBackend(backend);
    const before = tf.memory().numTensors;
    const got = tf.tidy(() => {
      const x = tf.tensor2d([
        [1, n, 3],
        [n, -1, -5],
        [2, 2, 1],
      ]);
      const y = tf.tensor3d([1, 2, n, 0, 5, n, 4, n, 0, 1, 2, 3], [3, 2, 2]);
      return {
        max1: ints(tf.argMax(x, 1)),
        min1: ints(tf.argMin(x, 1)),
        max0: ints(tf.argMax(x, 0)),
        min0: ints(tf.argMin(x, 0)),
        max3d: ints(tf.argMax(y, 1)),
        min3d: ints(tf.argMin(y, 1)),
        last3d: ints(tf.argMax(y, 2)),
        noNaN: ints(tf.argMax(tf.tensor2d([[1, 5, 3]]), 1)),
      };
    });
    // torch 1.13: x.argmax(1), x.argmin(1), x.argmax(0), x.argmin(0), y.argmax(1), y.argmin(1), y.argmax(2)
    expect(got).toEqual({
      max1: [1, 0, 0],
      min1: [1, 0, 2],
      max0: [1, 0, 0],
      min0: [1, 0, 1],
      max3d: [1, 0, 0, 0, 1, 1],
      min3d: [1, 1, 1, 0, 0, 0],
      last3d: [1, 0, 1, 1, 1, 1],
      noNaN: [1],
    });
    expect(tf.memory().numTensors).toBe(before);
  });
});
