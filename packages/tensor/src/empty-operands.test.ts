import { describe, expect, it } from 'vitest';
import { setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

const zerosOf = (shape: number[]) => new Array(tf.util.sizeFromShape(shape)).fill(0);
const conv = { strides: 1, pad: 'same', dataFormat: 'NHWC', dilations: 1 } as const;
const run = (name: string, inputs: tf.NamedTensorMap, attrs: object) =>
  tf.engine().runKernel(name, inputs, attrs as tf.NamedAttrMap) as tf.Tensor;

describe.each(BACKEND_PATHS)('kernels with an empty operand on %s (native kernels: %s)', (backend, withNative) => {
  it.skipIf(withNative && !native)(
    'give zeros (sums over no term) or an empty output, not what the heap held',
    async () => {
      await setBackend(backend);
      useNativeKernels(withNative);
      const before = tf.memory().numTensors;
      // stale values where the outputs will be allocated: unwritten outputs returned them
      tf.tidy(() => tf.fill([1 << 14], 123.5).dataSync());
      const got = tf.tidy(() => {
        const e = <R extends tf.Rank>(shape: number[]) => tf.zeros(shape) as unknown as tf.Tensor<R>;
        return {
          // x·W over no column, and a Linear weight's gradient over an empty batch: dyᵀ·x
          product: values(tf.matMul(e([3, 0]), e([0, 2]))),
          weightGrad: values(tf.matMul(e([0, 8]), e([0, 5]), true, false)),
          batched: values(tf.matMul(e([2, 5, 0]), e([2, 7, 0]), false, true)),
          broadcast: values(tf.matMul(e([1, 4, 0]), e([3, 0, 2]))),
          emptyRows: tf.matMul(e([0, 4]), tf.ones([4, 3])).shape,
          convNoChannel: values(tf.conv2d(e<tf.Rank.R4>([2, 4, 4, 0]), e<tf.Rank.R4>([3, 3, 0, 5]), 1, 'same')),
          convEmptyBatch: tf.conv2d(e<tf.Rank.R4>([0, 4, 4, 3]), tf.ones([3, 3, 3, 5]) as tf.Tensor4D, 1, 'same').shape,
          filterGradEmptyBatch: values(
            run(
              'Conv2DBackpropFilter',
              { x: e([0, 4, 4, 3]), dy: e([0, 4, 4, 5]) },
              { ...conv, filterShape: [3, 3, 3, 5] },
            ),
          ),
          inputGradNoFilter: values(
            run(
              'Conv2DBackpropInput',
              { dy: e([2, 4, 4, 0]), filter: e([3, 3, 3, 0]) },
              { ...conv, inputShape: [2, 4, 4, 3] },
            ),
          ),
          transposed: tf.transpose(e([0, 3, 4, 4]), [0, 2, 3, 1]).shape,
        };
      });
      expect(got).toEqual({
        product: zerosOf([3, 2]),
        weightGrad: zerosOf([8, 5]),
        batched: zerosOf([2, 5, 7]),
        broadcast: zerosOf([3, 4, 2]),
        emptyRows: [0, 3],
        convNoChannel: zerosOf([2, 4, 4, 5]),
        convEmptyBatch: [0, 4, 4, 5],
        filterGradEmptyBatch: zerosOf([3, 3, 3, 5]),
        inputGradNoFilter: zerosOf([2, 4, 4, 3]),
        transposed: [0, 4, 4, 3],
      });
      expect(tf.memory().numTensors).toBe(before);
    },
  );

  // probe DA: the empty shortcut skipped the kernel's inner-dimension check: [0, 3]·[4, 2] gave [0, 2]
  it.skipIf(withNative && !native)('a product with an empty operand and inner dims that differ raises', async () => {
    await setBackend(backend);
    useNativeKernels(withNative);
    const before = tf.memory().numTensors;
    const cases: [number[], number[], boolean][] = [
      [[0, 3], [4, 2], false],
      [[1, 0], [1, 0], false],
      [[2, 3, 0, 33], [2, 3, 0, 33], false],
      [[2, 0], [3, 2], true],
    ];
    for (const [a, b, transposeA] of cases)
      expect(() => tf.tidy(() => tf.matMul(tf.zeros(a), tf.zeros(b), transposeA)), `${a}·${b}`).toThrow(
        /Error in matMul: inner shapes \(\d+\) and \(\d+\)/,
      );
    expect(tf.memory().numTensors).toBe(before);
  });

  // probe CZ: wasm's gather of a [0, 3] tensor gave shape [1, 0, 1, 1]; topk, cumsum and cumprod trapped
  it("raw gather, topk, cumsum and cumprod of an empty input: torch's shapes, no trap", async () => {
    await setBackend(backend);
    useNativeKernels(withNative && native !== null);
    const before = tf.memory().numTensors;
    const shapes = tf.tidy(() => [
      tf.gather(tf.zeros([0, 3]), tf.tensor1d([2], 'int32'), 1).shape,
      tf.gather(tf.zeros([2, 0]), tf.tensor2d([0, 1, 1, 0], [2, 2], 'int32'), 0).shape,
      tf.topk(tf.zeros([3, 0]), 0).values.shape,
      tf.cumsum(tf.zeros([0, 2, 2]), 1).shape,
      tf.cumprod(tf.zeros([0, 2, 2]), 1).shape,
    ]);
    expect(shapes).toEqual([
      [0, 1],
      [2, 2, 0],
      [3, 0],
      [0, 2, 2],
      [0, 2, 2],
    ]);
    expect(tf.memory().numTensors).toBe(before);
  });
});
