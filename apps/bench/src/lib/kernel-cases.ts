// The kernel cases `pnpm bench kernels` times: the matmuls of the DDP bench's and the CLIP model's
// Linear layers, the CLIP model's convolutions and @ddp/tensor's fused ops, each as mean seconds per run.
import { gelu, geluGrad, layerNorm, layerNormGrad, softmax, softmaxGrad, tf } from '@ddp/tensor';

/** Runs fn until minSeconds have passed (at least 2 runs after one warm-up); mean seconds per run. */
export async function timeIt(fn: () => Promise<void> | void, minSeconds: number): Promise<number> {
  await fn();
  let runs = 0;
  const start = performance.now();
  while (runs < 2 || performance.now() - start < minSeconds * 1000) {
    await fn();
    runs++;
  }
  return (performance.now() - start) / 1000 / runs;
}

/** A Linear layer's products: batch rows through in → out features. */
export interface LinearShape {
  model: string;
  batch: number;
  inF: number;
  outF: number;
}
export const LINEARS: LinearShape[] = [
  { model: 'ddp', batch: 32, inF: 1024, outF: 2048 },
  { model: 'ddp', batch: 32, inF: 2048, outF: 2048 },
  { model: 'ddp', batch: 32, inF: 2048, outF: 1024 },
  { model: 'clip imageProj', batch: 256, inF: 3136, outF: 64 },
  { model: 'clip text mlp', batch: 512, inF: 32, outF: 128 },
  { model: 'transformer mlp', batch: 256, inF: 64, outF: 256 },
];
export interface MatmulCase {
  m: number;
  n: number;
  k: number;
  ta: boolean;
  tb: boolean;
}
/** forward y = x·Wᵀ, input gradient dx = dy·W, weight gradient dW = dyᵀ·x (W is [out, in], as PyTorch's). */
export const passesOf = ({ batch, inF, outF }: LinearShape): [string, MatmulCase][] => [
  ['fwd x·Wᵀ', { m: batch, n: outF, k: inF, ta: false, tb: true }],
  ['bwd dy·W', { m: batch, n: inF, k: outF, ta: false, tb: false }],
  ['bwd dyᵀ·x', { m: outF, n: inF, k: batch, ta: true, tb: false }],
];

export function matmulSeconds({ m, n, k, ta, tb }: MatmulCase, minSeconds: number): Promise<number> {
  const a = tf.randomNormal(ta ? [k, m] : [m, k], 0, 1, 'float32', 1);
  const b = tf.randomNormal(tb ? [n, k] : [k, n], 0, 1, 'float32', 2);
  // wasm and cpu run kernels synchronously: the product is done when matMul returns
  return timeIt(() => tf.matMul(a, b, ta, tb).dispose(), minSeconds).finally(() => tf.dispose([a, b]));
}

/** PyTorch nn.Conv2d geometry; ddp runs the kernels on NHWC (tfjs's layout). */
export interface ConvShape {
  model: string;
  n: number;
  h: number;
  w: number;
  ci: number;
  co: number;
  kernel: number;
  stride: number;
  pad: number;
}
export const CONVS: ConvShape[] = [
  { model: 'clip stem', n: 256, h: 28, w: 56, ci: 1, co: 16, kernel: 5, stride: 2, pad: 2 },
  { model: 'clip body', n: 256, h: 14, w: 28, ci: 16, co: 32, kernel: 3, stride: 2, pad: 1 },
];
export const CONV_PASSES = ['forward', 'input', 'filter'] as const;

export function convSeconds(c: ConvShape, pass: (typeof CONV_PASSES)[number], minSeconds: number): Promise<number> {
  const pad = [
    [0, 0],
    [c.pad, c.pad],
    [c.pad, c.pad],
    [0, 0],
  ] as const;
  const xShape: [number, number, number, number] = [c.n, c.h, c.w, c.ci];
  const fShape: [number, number, number, number] = [c.kernel, c.kernel, c.ci, c.co];
  const info = tf.backend_util.computeConv2DInfo(xShape, fShape, c.stride, 1, pad as never);
  const x = tf.randomNormal(xShape);
  const filter = tf.randomNormal(fShape);
  const dy = tf.randomNormal(info.outShape);
  const attrs = {
    strides: [c.stride, c.stride],
    pad,
    dataFormat: 'NHWC',
    dilations: 1,
    inputShape: xShape,
    filterShape: fShape,
  };
  const [name, inputs] = {
    forward: ['Conv2D', { x, filter }],
    input: ['Conv2DBackpropInput', { dy, filter }],
    filter: ['Conv2DBackpropFilter', { x, dy }],
  }[pass] as [string, tf.NamedTensorMap];
  const run = () => (tf.engine().runKernel(name, inputs, attrs as unknown as tf.NamedAttrMap) as tf.Tensor).dispose();
  return timeIt(run, minSeconds).finally(() => tf.dispose([x, filter, dy]));
}

export const convFlops = (c: ConvShape) => {
  const out =
    Math.floor((c.h + 2 * c.pad - c.kernel) / c.stride + 1) * Math.floor((c.w + 2 * c.pad - c.kernel) / c.stride + 1);
  return 2 * c.n * out * c.kernel * c.kernel * c.ci * c.co;
};

/** Fused ops over rows of the last axis: a transformer's activations at batch 128 (rows × width). */
export interface FusedCase {
  op: 'layerNorm' | 'gelu' | 'softmax';
  rows: number;
  cols: number;
}
export const FUSED: FusedCase[] = [
  { op: 'layerNorm', rows: 4096, cols: 64 },
  { op: 'gelu', rows: 4096, cols: 256 },
  { op: 'softmax', rows: 8192, cols: 32 },
];

export function fusedSeconds(
  { op, rows, cols }: FusedCase,
  pass: 'forward' | 'backward',
  minSeconds: number,
): Promise<number> {
  const [x, dy] = [
    tf.randomNormal([rows, cols], 0, 1, 'float32', 1),
    tf.randomNormal([rows, cols], 0, 1, 'float32', 2),
  ];
  const [w, b] = [tf.ones([cols]), tf.zeros([cols])];
  const { mean, rstd } = layerNorm(x, w, b, 1e-5);
  const y = softmax(x);
  const run = {
    layerNorm: [
      () => Object.values(layerNorm(x, w, b, 1e-5)),
      () => Object.values(layerNormGrad(dy, x, mean, rstd, w)),
    ],
    gelu: [() => [gelu(x)], () => [geluGrad(dy, x)]],
    softmax: [() => [softmax(x)], () => [softmaxGrad(dy, y)]],
  }[op][pass === 'forward' ? 0 : 1];
  return timeIt(() => tf.dispose(run()), minSeconds).finally(() => tf.dispose([x, dy, w, b, mean, rstd, y]));
}
