// The kernel cases `pnpm bench kernels` times: the matmuls of the DDP bench's and the CLIP model's Linear layers, the
// CLIP model's convolutions (what autograd's conv2d runs) and @ddp/tensor's fused ops, each as mean seconds per run.
import {
  biasAdd,
  channelSum,
  convTakesNCHW,
  gelu,
  geluGrad,
  layerNorm,
  layerNormGrad,
  nativeConv2d,
  nativeConv2dGrads,
  softmax,
  softmaxGrad,
  tf,
} from '@ddp/tensor';

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

/**
 * PyTorch nn.Conv2d geometry, with a bias; `dx`: whether training takes the input gradient (not for
 * the first layer, whose input is the data).
 */
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
  dx: boolean;
}
export const CONVS: ConvShape[] = [
  { model: 'clip stem', n: 256, h: 28, w: 56, ci: 1, co: 16, kernel: 5, stride: 2, pad: 2, dx: false },
  { model: 'clip body', n: 256, h: 14, w: 28, ci: 16, co: 32, kernel: 3, stride: 2, pad: 1, dx: true },
];
/** forward: y = conv(x, w) + b; backward: the gradients training takes (dW, db, and dx where `dx`) from one dy. */
export const CONV_PASSES = ['forward', 'backward'] as const;

/**
 * What @ddp/autograd's conv2d runs for one pass: with the native kernels, nativeConv2d and
 * nativeConv2dGrads on NCHW/OIHW (bias inside, both gradients in one call, x's reorder kept from a
 * forward); without them, tfjs-wasm's NHWC kernels (Conv2D and a bias add; the two backprop kernels
 * and a channel sum), the transposes around them left out.
 */
export function convSeconds(c: ConvShape, pass: (typeof CONV_PASSES)[number], minSeconds: number): Promise<number> {
  const spec = { strides: [c.stride, c.stride] as [number, number], padding: [c.pad, c.pad] as [number, number] };
  const out = (size: number) => Math.floor((size + 2 * c.pad - c.kernel) / c.stride + 1);
  const x = tf.randomNormal([c.n, c.ci, c.h, c.w]);
  const w = tf.randomNormal([c.co, c.ci, c.kernel, c.kernel]);
  const bias = tf.randomNormal([c.co]);
  const dy = tf.randomNormal([c.n, c.co, out(c.h), out(c.w)]);
  const held = [x, w, bias, dy];
  let run: () => tf.Tensor[];
  if (convTakesNCHW()) {
    const forward = () => [nativeConv2d(x, w, bias, spec)!];
    tf.dispose(forward()); // the forward before a backward, as in training
    run =
      pass === 'forward'
        ? forward
        : () => Object.values(nativeConv2dGrads(x, w, dy, spec, { dx: c.dx, dBias: true })!).filter((t) => t !== null);
  } else {
    const [xk, wk, dyk] = [
      tf.transpose(x, [0, 2, 3, 1]),
      tf.transpose(w, [2, 3, 1, 0]),
      tf.transpose(dy, [0, 2, 3, 1]),
    ];
    held.push(xk, wk, dyk);
    const pad = [
      [0, 0],
      [c.pad, c.pad],
      [c.pad, c.pad],
      [0, 0],
    ];
    const kernel = (name: string, inputs: tf.NamedTensorMap, shapes: object) => {
      const attrs = { strides: spec.strides, pad, dataFormat: 'NHWC', dilations: 1, ...shapes };
      return tf.engine().runKernel(name, inputs, attrs as unknown as tf.NamedAttrMap) as tf.Tensor;
    };
    run =
      pass === 'forward'
        ? () => [tf.tidy(() => biasAdd(kernel('Conv2D', { x: xk, filter: wk }, {}), bias, 3))]
        : () => [
            kernel('Conv2DBackpropFilter', { x: xk, dy: dyk }, { filterShape: wk.shape }),
            channelSum(dyk, 3),
            ...(c.dx ? [kernel('Conv2DBackpropInput', { dy: dyk, filter: wk }, { inputShape: xk.shape })] : []),
          ];
  }
  return timeIt(() => tf.dispose(run()), minSeconds).finally(() => tf.dispose(held));
}

/** Multiply-adds ×2 of one pass: the forward's product; backward's filter product, and the input one where `dx`. */
export const convFlops = (c: ConvShape, pass: (typeof CONV_PASSES)[number]) => {
  const out =
    Math.floor((c.h + 2 * c.pad - c.kernel) / c.stride + 1) * Math.floor((c.w + 2 * c.pad - c.kernel) / c.stride + 1);
  const product = 2 * c.n * out * c.kernel * c.kernel * c.ci * c.co;
  return pass === 'forward' ? product : product * (c.dx ? 2 : 1);
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
