import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf, useNativeKernels } from './index.js';
import { nativeConv } from './native-conv.js';

const initial = getBackend();
const native = useNativeKernels(true);
afterAll(async () => {
  useNativeKernels(true);
  await setBackend(initial as 'wasm');
});

type Shape = [number, number, number, number];
type Pad = 'same' | 'valid' | [[0, 0], [number, number], [number, number], [0, 0]];
interface Case {
  name: string;
  x: Shape;
  f: Shape;
  s: [number, number];
  pad: Pad;
  dilation?: number;
}

const explicit = (p: number): Pad => [
  [0, 0],
  [p, p],
  [p, p],
  [0, 0],
];
/** @ddp/nn's convolutions (explicit symmetric padding, CLIP's stem and body), tfjs's other paddings, 1×1, dilation. */
const cases: Case[] = [
  { name: 'CLIP stem: 5×5, stride 2, pad 2', x: [2, 12, 16, 1], f: [5, 5, 1, 4], s: [2, 2], pad: explicit(2) },
  { name: 'CLIP body: 3×3, stride 2, pad 1', x: [2, 7, 8, 4], f: [3, 3, 4, 5], s: [2, 2], pad: explicit(1) },
  { name: '3×3, stride 1, same', x: [2, 5, 5, 3], f: [3, 3, 3, 4], s: [1, 1], pad: 'same' },
  {
    name: 'valid, stride 2, leftover rows the filter never reaches',
    x: [2, 7, 6, 2],
    f: [3, 2, 2, 3],
    s: [2, 2],
    pad: 'valid',
  },
  {
    name: 'asymmetric explicit padding, strides 2×1',
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
  {
    name: 'padding after the input beyond the last window',
    x: [1, 7, 7, 2],
    f: [3, 3, 2, 2],
    s: [2, 2],
    pad: [
      [0, 0],
      [1, 2],
      [0, 3],
      [0, 0],
    ],
  },
  { name: 'even filter, same padding', x: [3, 6, 6, 1], f: [4, 4, 1, 2], s: [2, 2], pad: 'same' },
  { name: '1×1, stride 1 (no im2col)', x: [2, 4, 5, 6], f: [1, 1, 6, 3], s: [1, 1], pad: 'valid' },
  { name: '1×1, stride 2', x: [2, 5, 5, 3], f: [1, 1, 3, 2], s: [2, 2], pad: 'valid' },
  { name: 'dilation 2 (forward only in tfjs)', x: [2, 9, 9, 2], f: [3, 3, 2, 3], s: [1, 1], pad: 'valid', dilation: 2 },
];

/** The three passes of a case on the active backend: y, dx, dW, and how many tensors they left behind. */
function passes({ x: xShape, f, s, pad, dilation = 1 }: Case) {
  const x = tf.randomNormal(xShape, 0, 1, 'float32', 1) as tf.Tensor4D;
  const w = tf.randomNormal(f, 0, 1, 'float32', 2) as tf.Tensor4D;
  const info = tf.backend_util.computeConv2DInfo(xShape, f, s, dilation, pad);
  const dy = tf.randomNormal(info.outShape, 0, 1, 'float32', 3) as tf.Tensor4D;
  const before = tf.memory().numTensors;
  const attrs = { strides: s, pad, dataFormat: 'NHWC', dimRoundingMode: undefined } as const;
  const run = (name: string, inputs: tf.NamedTensorMap, extra: object) =>
    tf.engine().runKernel(name, inputs, { ...attrs, ...extra } as unknown as tf.NamedAttrMap) as tf.Tensor;
  const outs = [
    run('Conv2D', { x, filter: w }, { dilations: dilation }),
    ...(dilation === 1
      ? [
          run('Conv2DBackpropInput', { dy, filter: w }, { inputShape: xShape }),
          run('Conv2DBackpropFilter', { x, dy }, { filterShape: f }),
        ]
      : []),
  ];
  const left = tf.memory().numTensors - before - outs.length;
  const data = outs.map((o) => ({ shape: o.shape, values: Array.from(o.dataSync()) }));
  tf.dispose([x, w, dy, ...outs]);
  return { data, left };
}

type Run = (name: string, inputs: tf.NamedTensorMap, attrs: tf.NamedAttrMap) => tf.Tensor;
const toNCHW = (t: tf.Tensor) => tf.transpose(t, [0, 3, 1, 2]);
const toNHWC = (t: tf.Tensor) => tf.transpose(t, [0, 2, 3, 1]);

/** passes() with NCHW activations (the same values), outputs transposed back to NHWC to compare. */
function passesNCHW({ x: xShape, f, s, pad }: Case, run: Run) {
  const x = tf.randomNormal(xShape, 0, 1, 'float32', 1) as tf.Tensor4D;
  const w = tf.randomNormal(f, 0, 1, 'float32', 2) as tf.Tensor4D;
  const info = tf.backend_util.computeConv2DInfo(xShape, f, s, 1, pad);
  const dy = tf.randomNormal(info.outShape, 0, 1, 'float32', 3) as tf.Tensor4D;
  const [xc, dyc] = [toNCHW(x), toNCHW(dy)];
  const before = tf.memory().numTensors;
  const padNCHW = typeof pad === 'string' ? pad : [pad[0], pad[3], pad[1], pad[2]];
  const attrs = { strides: s, pad: padNCHW, dataFormat: 'NCHW', dimRoundingMode: undefined, dilations: 1 };
  const at = (extra: object) => ({ ...attrs, ...extra }) as unknown as tf.NamedAttrMap;
  const outs = [
    run('Conv2D', { x: xc, filter: w }, at({})),
    run('Conv2DBackpropInput', { dy: dyc, filter: w }, at({ inputShape: xc.shape })),
    run('Conv2DBackpropFilter', { x: xc, dy: dyc }, at({ filterShape: f })),
  ];
  const left = tf.memory().numTensors - before - outs.length;
  const data = outs
    .map((o, i) => tf.tidy(() => (i < 2 ? toNHWC(o) : o)))
    .map((o) => ({ shape: o.shape, values: Array.from(o.dataSync()) }));
  tf.dispose([x, w, dy, xc, dyc, ...outs]);
  return { data, left };
}

describe.skipIf(!native)('native Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter', () => {
  it.each(cases)('$name: the same as wasm and cpu, no temporaries left', async (c) => {
    await setBackend('cpu');
    const onCpu = passes(c);
    await setBackend('wasm');
    useNativeKernels(false);
    const onWasm = passes(c);
    useNativeKernels(true);
    const onNative = passes(c);
    expect(onNative.left).toBe(0);
    for (const [i, got] of onNative.data.entries()) {
      for (const want of [onCpu.data[i], onWasm.data[i]]) {
        expect(got.shape).toEqual(want.shape);
        const worst = Math.max(
          0,
          ...got.values.map((v, j) => Math.abs(v - want.values[j]) / (1 + Math.abs(want.values[j]))),
        );
        expect(worst).toBeLessThan(1e-5);
      }
    }
  });

  it.each(cases.filter((c) => !c.dilation))('$name, NCHW: the same as NHWC, no temporaries left', async (c) => {
    await setBackend('wasm');
    const want = passes(c);
    const onNative = passesNCHW(c, (name, inputs, attrs) => tf.engine().runKernel(name, inputs, attrs) as tf.Tensor);
    expect(onNative.left).toBe(0);
    // tfjs's kernels (NHWC only) through transposes: the path for what the addon does not take
    const fallback = (name: string, inputs: tf.NamedTensorMap, attrs: tf.NamedAttrMap) => {
      const kernel = nativeConv(name as never, null as never, tf.getKernel(name, 'cpu').kernelFunc);
      const out = kernel({ inputs, attrs, backend: tf.findBackend('cpu') }) as tf.TensorInfo;
      return tf.engine().makeTensorFromTensorInfo(out);
    };
    await setBackend('cpu');
    const throughNHWC = passesNCHW(c, fallback);
    await setBackend('wasm');
    expect(throughNHWC.left).toBe(0);
    for (const got of [onNative, throughNHWC]) {
      for (const [i, out] of got.data.entries()) {
        expect(out.shape).toEqual(want.data[i].shape);
        const worst = Math.max(
          0,
          ...out.values.map((v, j) => Math.abs(v - want.data[i].values[j]) / (1 + Math.abs(want.data[i].values[j]))),
        );
        expect(worst).toBeLessThan(1e-5);
      }
    }
  });

  it('runs on the thread count set after its first call (a plan keeps the count it was built with)', () => {
    // a fresh process at 1 thread: the first conv builds its plan; at 2 threads OpenMP's second
    // thread must do its share of the next ones (CPU ticks per thread from /proc, not timing: the host is shared)
    const script = `
      const { readdirSync, readFileSync } = await import('node:fs');
      const { setNumThreads, tf } = await import('@ddp/tensor');
      const ticks = (tid) => readFileSync('/proc/self/task/' + tid + '/stat', 'utf8').split(') ')[1].split(' ')
        .slice(11, 13).reduce((s, v) => s + Number(v), 0);
      const x = tf.randomNormal([64, 28, 28, 16]), filter = tf.randomNormal([3, 3, 16, 32]);
      const conv = () => tf.conv2d(x, filter, 1, 'same').dispose();
      conv();
      const old = new Set(readdirSync('/proc/self/task'));
      setNumThreads(2);
      conv();
      const added = readdirSync('/proc/self/task').filter((t) => !old.has(t));
      const used = () => [ticks(process.pid), added.reduce((s, t) => s + ticks(t), 0)];
      const [main0, others0] = used();
      for (let i = 0; i < 40; i++) conv();
      const [main1, others1] = used();
      console.log(JSON.stringify({ main: main1 - main0, others: others1 - others0 }));`;
    const child = spawnSync(
      process.execPath,
      ['--conditions=@ddp/source', '--import', 'tsx', '--input-type=module', '-e', script],
      {
        cwd: new URL('..', import.meta.url),
        env: { ...process.env, DDP_BACKEND: 'wasm', DDP_NATIVE: '1', DDP_NUM_THREADS: '1' },
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    const { main, others } = JSON.parse(child.stdout.trim().split('\n').at(-1)!) as { main: number; others: number };
    expect(main, child.stderr).toBeGreaterThan(0);
    expect(others / main, "CPU time of the threads started at 2 threads against the main thread's").toBeGreaterThan(
      0.3,
    );
  });
});
