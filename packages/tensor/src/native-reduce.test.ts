import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf, useNativeKernels } from './index.js';

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

/** [name, shape, axis, keepDims]: leading and trailing axes run natively, the rest falls back. */
const cases: [string, number[], number | number[] | undefined, boolean][] = [
  ['bias gradient of a conv: NHWC over [0, 1, 2]', [4, 3, 5, 6], [0, 1, 2], false],
  ['bias gradient of a Linear: over axis 0', [7, 9], 0, false],
  ['row sums: last axis, kept', [5, 8], -1, true],
  ['trailing two axes', [3, 4, 5], [1, 2], false],
  ['every axis (none given)', [3, 4, 5], undefined, false],
  ['every axis, kept', [3, 4], [0, 1], true],
  ['a middle axis (tfjs)', [3, 4, 5], 1, false],
  ['leading and last, not contiguous (tfjs)', [3, 4, 5], [0, 2], true],
  ['axes given out of order', [3, 4, 5], [1, 0], false],
  ['a vector', [11], 0, false],
];

function sum(shape: number[], axis: number | number[] | undefined, keepDims: boolean) {
  const x = tf.tensor(
    Array.from({ length: tf.util.sizeFromShape(shape) }, (_, i) => Math.sin(i * 0.7)),
    shape,
  );
  const before = tf.memory().numTensors;
  const y = tf.sum(x, axis, keepDims);
  const left = tf.memory().numTensors - before - 1;
  const out = { shape: y.shape, values: Array.from(y.dataSync()), left };
  tf.dispose([x, y]);
  return out;
}

describe.skipIf(!native)('native Sum', () => {
  it.each(cases)('%s: the same as wasm and cpu', async (_name, shape, axis, keepDims) => {
    await setBackend('cpu');
    const onCpu = sum(shape, axis, keepDims);
    await setBackend('wasm');
    useNativeKernels(false);
    const onWasm = sum(shape, axis, keepDims);
    useNativeKernels(true);
    const onNative = sum(shape, axis, keepDims);
    expect(onNative.left).toBe(0);
    for (const want of [onCpu, onWasm]) {
      expect(onNative.shape).toEqual(want.shape);
      for (const [i, v] of onNative.values.entries()) expect(v).toBeCloseTo(want.values[i], 5);
    }
  });

  // probe Y: blocks of 128 terms summed in float lost what cancels (72; torch 199, the sum 200)
  it('totals in double what cancels: 1e8, 200 ones and −1e8, along either axis', async () => {
    await setBackend('wasm');
    const terms = [1e8, ...Array(200).fill(1), -1e8];
    const along = (shape: number[], axis: number) => tf.tidy(() => tf.sum(tf.tensor(terms, shape), axis).dataSync()[0]);
    expect([along([202], 0), along([1, 202], 1), along([202, 1], 0)]).toEqual([200, 200, 200]);
  });

  it('leaves int32 and empty tensors to tfjs', async () => {
    await setBackend('wasm');
    expect(
      Array.from(
        tf
          .sum(
            tf.tensor(
              [
                [1, 2],
                [3, 4],
              ],
              [2, 2],
              'int32',
            ),
            0,
          )
          .dataSync(),
      ),
    ).toEqual([4, 6]);
    expect(tf.sum(tf.zeros([0, 3]), 0).shape).toEqual([3]);
  });
});
