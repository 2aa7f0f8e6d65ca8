import { describe, expect, it } from 'vitest';
import { setBackend, tf, useNativeKernels } from './index.js';
import { BACKEND_PATHS, restoreBackendAfterAll, values } from './test/backend-paths.js';

const native = restoreBackendAfterAll();

type Pair = [number, number];
const explicit = (p: number): [[0, 0], Pair, Pair, [0, 0]] => [
  [0, 0],
  [p, p],
  [p, p],
  [0, 0],
];
const random = (shape: number[], seed: number) => tf.randomUniform(shape, -1, 1, 'float32', seed);

const run = (name: string, inputs: tf.NamedTensorMap, attrs: object) =>
  tf.engine().runKernel(name, inputs, attrs as tf.NamedAttrMap) as tf.Tensor;

type Padding = number | ReturnType<typeof explicit>;
type Strides = number | Pair;

/** A convolution (plain or depthwise) and its two gradients' kernels, with padding `pad`. */
function conv(depthwise: boolean, x: tf.Tensor4D, f: tf.Tensor4D, strides: Strides, pad: Padding) {
  const attrs = { strides, pad, dataFormat: 'NHWC', dilations: 1 };
  const kernel = depthwise ? 'DepthwiseConv2dNative' : 'Conv2D';
  const y = run(kernel, { x, filter: f }, attrs);
  const dy = random(y.shape, 9);
  const dx = run(`${depthwise ? kernel : 'Conv2D'}BackpropInput`, { dy, filter: f }, { ...attrs, inputShape: x.shape });
  const df = run(`${depthwise ? kernel : 'Conv2D'}BackpropFilter`, { x, dy }, { ...attrs, filterShape: f.shape });
  return { shape: y.shape, y: values(y), dx: values(dx), df: values(df) };
}

/** Max and average pooling over [3, 2] windows and their gradients' kernels, with padding `pad`. */
function pools(x: tf.Tensor4D, strides: Pair, pad: Padding) {
  const attrs = { filterSize: [3, 2], strides, pad };
  return (['Max', 'Avg'] as const).map((kind) => {
    const y = run(`${kind}Pool`, { x }, attrs);
    const dy = random(y.shape, 9);
    const dx = run(`${kind}PoolGrad`, kind === 'Max' ? { dy, input: x, output: y } : { dy, input: x }, attrs);
    return { shape: y.shape, y: values(y), dx: values(dx) };
  });
}

// torch's output width for a [3, 2] filter, pad 0, on 13 columns: 12; tfjs 4.22 sized it with the
// filter's height (11), and tfjs-wasm's kernel wrote the 12th column over other tensors
describe.each(BACKEND_PATHS)('a numeric padding on %s (native kernels: %s)', (backend, withNative) => {
  const cases = [
    { name: '[3, 2] filter, pad 0', f: [3, 2, 4, 6], s: 1, p: 0, out: [1, 15, 12, 6] },
    { name: '[3, 2] filter, pad 1', f: [3, 2, 4, 6], s: 1, p: 1, out: [1, 17, 14, 6] },
    { name: '[2, 3] filter, stride [1, 2], pad 2', f: [2, 3, 4, 6], s: [1, 2] as Pair, p: 2, out: [1, 20, 8, 6] },
    { name: '3 × 3, stride [2, 1], pad 1', f: [3, 3, 4, 6], s: [2, 1] as Pair, p: 1, out: [1, 9, 13, 6] },
  ];

  it.skipIf(withNative && !native).each(cases)(
    'conv2d, $name: the shape torch gives, and values and gradients as the explicit padding',
    async ({ f: fShape, s, p, out }) => {
      await setBackend(backend);
      useNativeKernels(withNative);
      const before = tf.memory().numTensors;
      const sentinel = tf.range(0, 4096);
      const got = tf.tidy(() => {
        const [x, f] = [random([1, 17, 13, 4], 1) as tf.Tensor4D, random(fShape, 2) as tf.Tensor4D];
        return { numeric: conv(false, x, f, s, p), byDim: conv(false, x, f, s, explicit(p)) };
      });
      expect(got.numeric.shape).toEqual(out);
      expect(got.numeric).toEqual(got.byDim);
      expect(values(sentinel)).toEqual(Array.from({ length: 4096 }, (_, i) => i));
      sentinel.dispose();
      expect(tf.memory().numTensors).toBe(before);
    },
  );

  it.skipIf(withNative && !native)(
    'depthwise conv2d, max pool and avg pool over [3, 2] windows: as the explicit padding',
    async () => {
      await setBackend(backend);
      useNativeKernels(withNative);
      const before = tf.memory().numTensors;
      const got = tf.tidy(() => {
        const [x, f] = [random([2, 9, 7, 3], 3) as tf.Tensor4D, random([3, 2, 3, 2], 4) as tf.Tensor4D];
        const both = (pad: Padding) => ({ depthwise: conv(true, x, f, [1, 2], pad), pools: pools(x, [1, 2], pad) });
        return { numeric: both(1), byDim: both(explicit(1)) };
      });
      expect(got.numeric.depthwise.shape).toEqual([2, 9, 4, 6]);
      expect(got.numeric.pools.map((p) => p.shape)).toEqual([
        [2, 9, 4, 3],
        [2, 9, 4, 3],
      ]);
      expect(got.numeric).toEqual(got.byDim);
      expect(tf.memory().numTensors).toBe(before);
    },
  );

  // probe DA: tfjs-wasm's XNNPACK convolution took TF's negative 'same' padding unclamped, off by O(1), silently
  const sameCases = [
    { x: [2, 3, 8, 5], f: [3, 1, 5, 7], s: [3, 3] as Pair, rows: [0, 0], columns: [0, 0] },
    { x: [3, 12, 11, 2], f: [1, 2, 2, 1], s: [3, 2] as Pair, rows: [0, 0], columns: [0, 1] },
    { x: [2, 2, 5, 2], f: [1, 3, 2, 2], s: [2, 1] as Pair, rows: [0, 0], columns: [1, 1] },
  ];
  it.skipIf(withNative && !native).each(sameCases)(
    "'same' on $x, filter $f, stride $s: TF's padding, made explicit (at least 0), in conv, depthwise and fused",
    async ({ x: xShape, f: fShape, s, rows, columns }) => {
      await setBackend(backend);
      useNativeKernels(withNative);
      const before = tf.memory().numTensors;
      const got = tf.tidy(() => {
        const [x, f] = [random(xShape, 5) as tf.Tensor4D, random(fShape, 6) as tf.Tensor4D];
        const depthwiseFilter = tf.slice(f, [0, 0, 0, 0], [-1, -1, -1, 1]);
        const bias = random([fShape[3]], 7) as tf.Tensor1D;
        const all = (pad: 'same' | [[0, 0], number[], number[], [0, 0]]) => ({
          conv: values(tf.conv2d(x, f, s, pad as 'same')),
          depthwise: values(tf.depthwiseConv2d(x, depthwiseFilter, s, pad as 'same')),
          fused: values(tf.fused.conv2d({ x, filter: f, strides: s, pad: pad as 'same', bias, activation: 'relu' })),
        });
        return { same: all('same'), byDim: all([[0, 0], rows, columns, [0, 0]]) };
      });
      expect(got.same).toEqual(got.byDim);
      expect(tf.memory().numTensors).toBe(before);
    },
  );
});
