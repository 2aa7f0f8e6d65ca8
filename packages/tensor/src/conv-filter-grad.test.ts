import { describe, expect, it, onTestFinished } from 'vitest';
import { setBackend, tf, useNativeKernels } from './index.js';

type Pad = 'same' | 'valid' | [[0, 0], [number, number], [number, number], [0, 0]];

/** dW by its definition, in plain loops. */
function reference(
  x: tf.Tensor4D,
  dy: tf.Tensor4D,
  filterShape: [number, number, number, number],
  strides: [number, number],
  pad: Pad,
): Float32Array {
  const info = tf.backend_util.computeConv2DInfo(x.shape, filterShape, strides, 1, pad);
  const [n, h, w, ci] = x.shape;
  const [, ho, wo, co] = dy.shape;
  const [kh, kw] = filterShape;
  const xs = x.dataSync();
  const ds = dy.dataSync();
  const out = new Float32Array(kh * kw * ci * co);
  for (let a = 0; a < kh; a++)
    for (let b = 0; b < kw; b++)
      for (let c = 0; c < ci; c++)
        for (let o = 0; o < co; o++) {
          let s = 0;
          for (let m = 0; m < n; m++)
            for (let i = 0; i < ho; i++)
              for (let j = 0; j < wo; j++) {
                const r = i * strides[0] + a - info.padInfo.top;
                const q = j * strides[1] + b - info.padInfo.left;
                if (r < 0 || r >= h || q < 0 || q >= w) continue;
                s += xs[((m * h + r) * w + q) * ci + c] * ds[((m * ho + i) * wo + j) * co + o];
              }
          out[((a * kw + b) * ci + c) * co + o] = s;
        }
  return out;
}

const cases: {
  x: [number, number, number, number];
  f: [number, number, number, number];
  s: [number, number];
  pad: Pad;
}[] = [
  { x: [2, 5, 5, 3], f: [3, 3, 3, 4], s: [1, 1], pad: 'same' },
  { x: [2, 7, 6, 2], f: [3, 2, 2, 3], s: [2, 2], pad: 'valid' }, // leftover rows/cols the filter never reaches
  {
    x: [1, 8, 8, 2],
    f: [3, 3, 2, 2],
    s: [2, 1],
    pad: [
      [0, 0],
      [1, 1],
      [2, 0],
      [0, 0],
    ],
  },
  { x: [3, 6, 6, 1], f: [4, 4, 1, 2], s: [2, 2], pad: 'same' },
];

describe('Conv2DBackpropFilter as a dilated convolution', () => {
  // wasm without the native kernels: native-conv.test.ts covers them
  for (const backend of ['cpu', 'wasm'] as const) {
    it(`matches the definition on ${backend} (strides, explicit and same/valid padding), leaking nothing`, async () => {
      await setBackend(backend);
      const native = useNativeKernels(false);
      onTestFinished(() => void useNativeKernels(native));
      for (const { x: xShape, f, s, pad } of cases) {
        const x = tf.randomNormal(xShape, 0, 1, 'float32', 1) as tf.Tensor4D;
        const info = tf.backend_util.computeConv2DInfo(xShape, f, s, 1, pad);
        const dy = tf.randomNormal([xShape[0], info.outHeight, info.outWidth, f[3]], 0, 1, 'float32', 2) as tf.Tensor4D;
        const before = tf.memory().numTensors;
        const dw = tf.engine().runKernel('Conv2DBackpropFilter', { x, dy }, {
          strides: s,
          pad,
          dataFormat: 'NHWC',
          filterShape: f,
        } as unknown as tf.NamedAttrMap) as tf.Tensor;
        expect(dw.shape).toEqual(f);
        const want = reference(x, dy, f, s, pad);
        const got = dw.dataSync();
        for (const [i, v] of want.entries()) expect(got[i]).toBeCloseTo(v, 3);
        dw.dispose();
        expect(tf.memory().numTensors).toBe(before);
        tf.dispose([x, dy]);
      }
    });
  }
});
