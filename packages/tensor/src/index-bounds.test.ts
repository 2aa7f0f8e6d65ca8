import { describe, expect, it } from 'vitest';
import { IndexBoundsError, setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

const x4 = () => tf.tensor1d([10, 11, 12, 13]);
const ids = (...v: number[]) => tf.tensor2d(v, [v.length, 1], 'int32');
/** Raw ops given an index outside their input: each must throw (tfjs-wasm read or wrote past the tensor). */
const OUTSIDE: [string, () => unknown, RegExp][] = [
  ['slice past the end', () => tf.slice(x4(), [2], [10]), /would overflow input.shape\[0\] \(4\)/],
  ['slice of a matrix past its rows', () => tf.slice(tf.ones([2, 3]), [1, 1], [2, 2]), /would overflow/],
  ['gatherND at 9', () => tf.gatherND(x4(), ids(9)), /Invalid indices: 9 does not index into 4/],
  ['gatherND at −2', () => tf.gatherND(x4(), ids(-2)), /Invalid indices: -2/],
  ['scatterND at 7', () => tf.scatterND(ids(7), tf.tensor1d([5]), [4]), /Invalid indices: 7/],
  ['scatterND at −3', () => tf.scatterND(ids(-3), tf.tensor1d([5]), [4]), /Invalid indices: -3/],
  ['tensorScatterUpdate at 8', () => tf.tensorScatterUpdate(x4(), ids(8), tf.tensor1d([5])), /Invalid indices: 8/],
  ['sparseToDense at 9', () => tf.sparseToDense(tf.tensor1d([9], 'int32'), tf.tensor1d([5]), [4]), /Invalid indices/],
  ['bincount of −1', () => tf.bincount(tf.tensor1d([-1, 1], 'int32'), tf.tensor1d([]), 3), /non-negative/],
  ['transpose by [0, 0]', () => tf.transpose(tf.ones([2, 3]), [0, 0]), /perm \[0,0\] is not a permutation/],
  ['cumsum along axis 2 of a vector', () => tf.cumsum(x4(), 2), /cumsum: axis 2 is out of range/],
  ['cumprod along axis −3 of a vector', () => tf.cumprod(x4(), -3), /cumprod: axis -3 is out of range/],
  [
    'cropAndResize from image 5 of 1',
    () => tf.image.cropAndResize(tf.ones([1, 4, 4, 1]), tf.tensor2d([[0, 0, 1, 1]]), tf.tensor1d([5], 'int32'), [2, 2]),
    /box index 5 \(box 0\) is not an image of the batch of 1/,
  ],
];

describe.each(BACKEND_PATHS)('raw ops given indices outside their input on %s (native kernels: %s)', (backend, on) => {
  it.skipIf(on && !native).each(OUTSIDE)('%s: refused, and no other tensor touched', async (_name, op, message) => {
    await setBackend(backend);
    useNativeKernels(on);
    const before = tf.memory().numTensors;
    const sentinel = tf.fill([64], 7);
    // was on wasm: values read past the tensor, zeros, or a write past the output that a later op crashed on
    expect(() => tf.tidy(op as () => tf.Tensor)).toThrow(message);
    tf.tidy(() => {
      for (let i = 0; i < 20; i++) tf.add(tf.ones([64]), 1);
    });
    expect(values(sentinel).every((v) => v === 7)).toBe(true);
    sentinel.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it.skipIf(on && !native)("a negative pad crops, as cpu's and torch's F.pad (was a crash on wasm)", async () => {
    await setBackend(backend);
    useNativeKernels(on);
    const got = tf.tidy(() => [
      values(tf.pad(x4(), [[-1, 0]])),
      values(
        tf.pad(tf.ones([2, 3]), [
          [0, 0],
          [-1, -1],
        ]),
      ),
    ]);
    expect(got).toEqual([
      [11, 12, 13],
      [1, 1],
    ]);
  });

  it.skipIf(on && !native)('the typed error names the op', async () => {
    await setBackend(backend);
    useNativeKernels(on);
    expect(() => tf.tidy(() => tf.transpose(tf.ones([2, 3]), [1, 1]))).toThrow(IndexBoundsError);
  });
});
