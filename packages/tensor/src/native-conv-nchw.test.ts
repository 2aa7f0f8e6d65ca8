import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, nativeConv2d, nativeConv2dGrads, setBackend, tf, useNativeKernels } from './index.js';

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

interface Case {
  name: string;
  /** x [N, C, H, W], weight [O, C, kH, kW] */
  x: number[];
  w: number[];
  strides: [number, number];
  padding: [number, number];
}
/** @ddp/nn's convolutions as the CLIP model has them (smaller batches), and an asymmetric one. */
const cases: Case[] = [
  { name: 'CLIP stem: 5×5, stride 2, pad 2', x: [3, 1, 12, 16], w: [16, 1, 5, 5], strides: [2, 2], padding: [2, 2] },
  { name: 'CLIP body: 3×3, stride 2, pad 1', x: [2, 16, 7, 10], w: [32, 16, 3, 3], strides: [2, 2], padding: [1, 1] },
  { name: '3×2 kernel, strides 1×2, pad 1×0', x: [2, 3, 6, 7], w: [5, 3, 3, 2], strides: [1, 2], padding: [1, 0] },
  // a sum over no input channel: y is the bias alone, so the bias's gradient is still dy's channel sums
  { name: 'no input channel', x: [2, 0, 8, 8], w: [4, 0, 3, 3], strides: [1, 1], padding: [1, 1] },
];
const flags = [
  { bias: true, dx: true },
  { bias: false, dx: true },
  { bias: true, dx: false },
];

const values = (shape: number[], seed: number) =>
  tf.tensor(
    Float32Array.from({ length: tf.util.sizeFromShape(shape) }, (_, i) => Math.sin(seed + i * 0.37) * 2),
    shape,
  );

/** y, dx, dWeight, dBias from tfjs's own kernels on the cpu backend (NHWC activations, HWIO filters). */
function reference(c: Case, bias: boolean) {
  const [x, w, b] = [values(c.x, 1), values(c.w, 2), values([c.w[0]], 3)];
  const pad = [
    [0, 0],
    [c.padding[0], c.padding[0]],
    [c.padding[1], c.padding[1]],
    [0, 0],
  ];
  const attrs = { strides: c.strides, pad, dataFormat: 'NHWC', dilations: 1 } as unknown as tf.NamedAttrMap;
  const run = (name: string, inputs: tf.NamedTensorMap, extra = {}) =>
    tf.engine().runKernel(name, inputs, { ...attrs, ...extra }) as tf.Tensor;
  const [xh, wh] = [tf.transpose(x, [0, 2, 3, 1]), tf.transpose(w, [2, 3, 1, 0])];
  const yh = run('Conv2D', { x: xh, filter: wh });
  const y = tf.transpose(bias ? tf.add(yh, b) : yh, [0, 3, 1, 2]);
  const dy = values(y.shape, 4);
  const dyh = tf.transpose(dy, [0, 2, 3, 1]);
  const dx = tf.transpose(run('Conv2DBackpropInput', { dy: dyh, filter: wh }, { inputShape: xh.shape }), [0, 3, 1, 2]);
  const dw = tf.transpose(run('Conv2DBackpropFilter', { x: xh, dy: dyh }, { filterShape: wh.shape }), [3, 2, 0, 1]);
  const db = tf.sum(dy, [0, 2, 3]);
  const out = [y, dx, dw, db].map((t) => ({ shape: t.shape, values: Array.from(t.dataSync()) }));
  tf.dispose([x, w, b, xh, wh, yh, y, dy, dyh, dx, dw, db]);
  return out;
}

function expectClose(got: tf.Tensor | null, want: { shape: number[]; values: number[] }, what: string) {
  expect(got, what).not.toBeNull();
  expect(got!.shape, what).toEqual(want.shape);
  const a = got!.dataSync();
  const worst = Math.max(0, ...want.values.map((v, i) => Math.abs(a[i] - v) / (1 + Math.abs(v))));
  expect(worst, what).toBeLessThan(1e-5);
}

describe.skipIf(!native)('nativeConv2d / nativeConv2dGrads (NCHW, OIHW, bias inside the convolution)', () => {
  for (const c of cases) {
    it.each(flags)(`${c.name}, bias $bias, dx $dx: tfjs's values, no tensors left over`, async ({ bias, dx }) => {
      await setBackend('cpu');
      const [wantY, wantDx, wantDw, wantDb] = reference(c, bias);
      await setBackend('wasm');
      const before = tf.memory().numTensors;
      const [x, w, b] = [values(c.x, 1), values(c.w, 2), values([c.w[0]], 3)];
      const spec = { strides: c.strides, padding: c.padding };
      const y = nativeConv2d(x, w, bias ? b : null, spec);
      expectClose(y, wantY, 'y');
      const dy = values(y!.shape, 4);
      const grads = nativeConv2dGrads(x, w, dy, spec, { dx, dBias: bias });
      expect(grads).not.toBeNull();
      if (dx) expectClose(grads!.dx, wantDx, 'dx');
      else expect(grads!.dx).toBeNull();
      expectClose(grads!.dWeight, wantDw, 'dWeight');
      if (bias) expectClose(grads!.dBias, wantDb, 'dBias');
      else expect(grads!.dBias).toBeNull();
      tf.dispose([x, w, b, y!, dy, grads!.dx!, grads!.dWeight, grads!.dBias!].filter(Boolean));
      expect(tf.memory().numTensors).toBe(before);
    });
  }

  it("takes x's gradient pass from x, not from another forward of the same geometry in between", async () => {
    // the backward reuses the forward's reorder of x only while that buffer still holds the same x
    const c = cases[1];
    await setBackend('cpu');
    const [, , wantDw, wantDb] = reference(c, true);
    await setBackend('wasm');
    const [x, w, b] = [values(c.x, 1), values(c.w, 2), values([c.w[0]], 3)];
    const spec = { strides: c.strides, padding: c.padding };
    const other = values(c.x, 9);
    const y = nativeConv2d(x, w, b, spec)!;
    const yOther = nativeConv2d(other, w, b, spec)!; // the same plan: its buffer now holds `other`
    const dy = values(y.shape, 4);
    for (let pass = 0; pass < 2; pass++) {
      const grads = nativeConv2dGrads(x, w, dy, spec, { dx: true, dBias: true })!;
      expectClose(grads.dWeight, wantDw, `dWeight, pass ${pass}`);
      expectClose(grads.dBias, wantDb, `dBias, pass ${pass}`);
      tf.dispose([grads.dx!, grads.dWeight, grads.dBias!]);
      tf.dispose(nativeConv2d(x, w, b, spec)!); // the second pass: the buffer holds x again
    }
    tf.dispose([x, w, b, other, y, yOther, dy]);
  });

  it('is null where the native kernels are off or on another backend (the caller runs tfjs)', async () => {
    await setBackend('wasm');
    const [x, w] = [values([1, 2, 5, 5], 1), values([3, 2, 3, 3], 2)];
    const spec = { strides: [1, 1] as [number, number], padding: [1, 1] as [number, number] };
    useNativeKernels(false);
    expect(nativeConv2d(x, w, null, spec)).toBeNull();
    useNativeKernels(true);
    tf.dispose([x, w]);
    await setBackend('cpu');
    const [xc, wc] = [values([1, 2, 5, 5], 1), values([3, 2, 3, 3], 2)];
    expect(nativeConv2d(xc, wc, null, spec)).toBeNull();
    tf.dispose([xc, wc]);
  });
});
