import { describe, expect, it } from 'vitest';
import { EmptyReductionError, setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

describe.each(['wasm', 'cpu'] as const)('reductions over an empty dim on %s', (backend) => {
  it('give torch values, not what the heap held (sum 0, prod 1, mean NaN, max -Inf, any false)', async () => {
    await setBackend(backend);
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

  it('argMax/argMin over an empty dim raise EmptyReductionError as torch (was index 0, a row that is not there)', async () => {
    await setBackend(backend);
    const before = tf.memory().numTensors;
    const e = tf.zeros([0, 3]);
    const rows = tf.zeros([3, 0]);
    expect(() => tf.argMax(e, 0)).toThrow(EmptyReductionError);
    expect(() => tf.argMin(e)).toThrow(/argMin: dim 0 of the input \[0,3\] is empty/);
    expect(() => tf.argMax(rows, -1)).toThrow(/argMax: dim 1 of the input \[3,0\] is empty/);
    expect(() => tf.argMin(rows, 1)).toThrow(EmptyReductionError);
    // torch: an empty output over a non-empty dim is fine (argmax(dim=1) of [0, 3] is [])
    expect(tf.tidy(() => tf.argMax(e, 1).shape)).toEqual([0]);
    expect(tf.tidy(() => values(tf.argMin(tf.tensor2d([[3, 1, 2]]), 1)))).toEqual([1]);
    tf.dispose([e, rows]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('leave non-empty reductions alone', async () => {
    await setBackend(backend);
    const x = tf.tensor([1, 2, 3, 4], [2, 2]);
    expect(tf.tidy(() => [values(tf.sum(x, 0)), values(tf.mean(x)), values(tf.max(x, 1))])).toEqual([
      [4, 6],
      [2.5],
      [2, 4],
    ]);
    x.dispose();
  });
});

describe.each(BACKEND_PATHS)(
  'reductions of an empty rank-4 tensor on %s (native kernels: %s)',
  (backend, withNative) => {
    it.skipIf(withNative && !native)(
      'over axes that are not the innermost give torch values and shapes (was: divide by zero trapped in wasm)',
      async () => {
        await setBackend(backend);
        useNativeKernels(withNative);
        const before = tf.memory().numTensors;
        const got = tf.tidy(() => {
          const e = tf.zeros([2, 0, 3, 4]);
          const shapeAndValues = (t: tf.Tensor) => [t.shape, t.dtype, values(t)];
          return {
            emptyOut: tf.sum(tf.zeros([1, 0, 4, 4]), [0, 2]).shape,
            sumKeep: shapeAndValues(tf.sum(e, [1, 2], true)),
            mean: shapeAndValues(tf.mean(e, [1, 2])),
            prod: shapeAndValues(tf.prod(e, 1)),
            logSumExp: shapeAndValues(tf.logSumExp(e, [1, 2])),
            minEmptyOut: tf.min(tf.zeros([1, 3, 0, 4]), 1).shape,
            sumBool: shapeAndValues(tf.sum(tf.zeros([2, 0, 3], 'bool'), [0, 1])),
          };
        });
        // torch: z = zeros(2, 0, 3, 4); z.sum([1, 2], keepdim=True), z.mean([1, 2]), z.prod(1),
        // logsumexp(z, [1, 2]); zeros(1, 0, 4, 4).sum([0, 2]) is [0, 4]; zeros(1, 3, 0, 4).amin(1) [1, 0, 4];
        // zeros(2, 0, 3, dtype=bool).sum([0, 1]) int64 [0, 0, 0]
        expect(got).toEqual({
          emptyOut: [0, 4],
          sumKeep: [[2, 1, 1, 4], 'float32', new Array(8).fill(0)],
          mean: [[2, 4], 'float32', new Array(8).fill(Number.NaN)],
          prod: [[2, 3, 4], 'float32', new Array(24).fill(1)],
          logSumExp: [[2, 4], 'float32', new Array(8).fill(-Infinity)],
          minEmptyOut: [1, 0, 4],
          sumBool: [[3], 'int32', [0, 0, 0]],
        });
        expect(tf.memory().numTensors).toBe(before);
      },
    );
  },
);
