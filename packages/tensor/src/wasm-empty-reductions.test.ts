import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

const values = (t: tf.Tensor) => Array.from(t.dataSync() as ArrayLike<number>);

describe('reductions over an empty dim on wasm', () => {
  it('give torch values, not what the heap held (sum 0, prod 1, mean NaN, max -Inf, any false)', async () => {
    await setBackend('wasm');
    const before = tf.memory().numTensors;
    // stale values where the outputs will be allocated: the unwritten outputs returned them
    tf.tidy(() => tf.fill([4096], 123.5).dataSync());
    const e = tf.zeros([0, 3]);
    const i = tf.zeros([0, 3], 'int32');
    const b = tf.zeros([0, 2], 'bool');
    const got = tf.tidy(() => ({
      sum: values(tf.sum(e)),
      sum0: values(tf.sum(e, 0)),
      sumKeep: values(tf.sum(e, 0, true)),
      sumInt: values(tf.sum(i, 0)),
      prod0: values(tf.prod(e, 0)),
      mean: values(tf.mean(e)),
      mean0: values(tf.mean(e, 0)),
      max0: values(tf.max(e, 0)),
      min0: values(tf.min(e, 0)),
      maxInt: values(tf.max(i, 0)),
      logSumExp0: values(tf.logSumExp(e, 0)),
      any0: values(tf.any(b, 0)),
      all0: values(tf.all(b, 0)),
      sumOfEmptyRows: tf.sum(e, 1).shape,
    }));
    expect(got).toEqual({
      sum: [0],
      sum0: [0, 0, 0],
      sumKeep: [0, 0, 0],
      sumInt: [0, 0, 0],
      prod0: [1, 1, 1],
      mean: [Number.NaN],
      mean0: [Number.NaN, Number.NaN, Number.NaN],
      max0: [-Infinity, -Infinity, -Infinity],
      min0: [Infinity, Infinity, Infinity],
      maxInt: [-(2 ** 31), -(2 ** 31), -(2 ** 31)],
      logSumExp0: [-Infinity, -Infinity, -Infinity],
      any0: [0, 0],
      all0: [1, 1],
      sumOfEmptyRows: [0],
    });
    tf.dispose([e, i, b]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('leave non-empty reductions alone', async () => {
    await setBackend('wasm');
    const x = tf.tensor([1, 2, 3, 4], [2, 2]);
    expect(tf.tidy(() => [values(tf.sum(x, 0)), values(tf.mean(x)), values(tf.max(x, 1))])).toEqual([
      [4, 6],
      [2.5],
      [2, 4],
    ]);
    x.dispose();
  });
});
