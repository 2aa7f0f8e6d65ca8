import { readFileSync } from 'node:fs';
import { chooseOpenBLASCore } from './openblas-core.js';

export { chooseOpenBLASCore } from './openblas-core.js';

import { createRequire } from 'node:module';

/**
 * The native addon's functions (src/*.cc). Every kernel takes the tfjs-wasm heap (the
 * module's current HEAPU8: re-read it after any allocation, memory growth replaces it) and
 * byte offsets of float32 data in it, checked against its length (RangeError outside).
 */
export interface NativeKernels {
  /**
   * c[i] = op(a[i])·op(b[i]) for i < batch, row-major, through sgemm (oneDNN's at one thread from 2^16
   * multiply-adds, else OpenBLAS's): a is [m, k]
   * ([k, m] when transA), b [k, n] ([n, k] when transB), c [m, n]; strides in elements
   * between batch entries, 0 to reuse one matrix for every entry.
   */
  BatchMatMul(
    heap: Uint8Array,
    a: number,
    b: number,
    c: number,
    batch: number,
    m: number,
    n: number,
    k: number,
    transA: boolean,
    transB: boolean,
    strideA: number,
    strideB: number,
  ): void;
  /**
   * y [n, ho, wo, co] = conv(x [n, h, w, ci], filter [kh, kw, ci, co]); geometry as tfjs's
   * Conv2DInfo. With channelsFirst (the geometry's last entry) x and y are NCHW, as dx and dy below.
   */
  Conv2D(heap: Uint8Array, x: number, filter: number, y: number, ...geometry: ConvGeometry): void;
  /** dx [n, h, w, ci] from dy [n, ho, wo, co] and filter. */
  Conv2DBackpropInput(heap: Uint8Array, dy: number, filter: number, dx: number, ...geometry: ConvGeometry): void;
  /** dFilter [kh, kw, ci, co] from x and dy. */
  Conv2DBackpropFilter(heap: Uint8Array, x: number, dy: number, dFilter: number, ...geometry: ConvGeometry): void;
  /**
   * y = conv(x, weight) + bias with PyTorch's OIHW weight [co, ci, kh, kw], bias [co] (-1: none)
   * added by the convolution itself; x and y as in Conv2D. xToken names x's data (a number not used
   * for other data while it lives; -1: none), so that ConvBackward can reuse this call's reorder of x.
   */
  ConvForward(
    heap: Uint8Array,
    x: number,
    weight: number,
    bias: number,
    y: number,
    xToken: number,
    ...geometry: ConvGeometry
  ): void;
  /**
   * ConvForward's gradients in one call: dx (-1: not computed), dWeight [co, ci, kh, kw] and dBias
   * [co] (-1: none, else summed by the filter pass) from x, weight and dy, dy reordered once for both
   * passes, x not at all when the last ConvForward of this geometry had the same xToken.
   */
  ConvBackward(
    heap: Uint8Array,
    x: number,
    weight: number,
    dy: number,
    dx: number,
    dWeight: number,
    dBias: number,
    xToken: number,
    ...geometry: ConvGeometry
  ): void;
  /** out = Σ over the rows of x [rows, cols] (overRows: out has cols entries) or over its columns (rows entries). */
  Sum(heap: Uint8Array, x: number, out: number, rows: number, cols: number, overRows: boolean): void;
  /** out = x tiled reps[d] times along each dimension d; elementBytes 4 (float32, int32) or 1 (bool). */
  Tile(heap: Uint8Array, x: number, out: number, elementBytes: 1 | 4, rank: number, ...shapeThenReps: number[]): void;
  /**
   * One Adam(W) step over n float32 values, out-of-place: p' = p·decay − m'/(√v'/sqrtBiasCorrection2 + eps)·stepSize,
   * m' = m + (g − m)·oneMinusBeta1, v' = v·beta2 + g²·oneMinusBeta2; every number rounded to float32 first.
   */
  AdamStep(
    heap: Uint8Array,
    param: number,
    grad: number,
    expAvg: number,
    expAvgSq: number,
    outParam: number,
    outExpAvg: number,
    outExpAvgSq: number,
    n: number,
    decay: number,
    oneMinusBeta1: number,
    beta2: number,
    oneMinusBeta2: number,
    sqrtBiasCorrection2: number,
    eps: number,
    stepSize: number,
  ): void;
  /** Layer norm of x [rows, cols] over cols: y, and mean and rstd [rows] (1/√(biased variance + eps)). */
  LayerNorm(
    heap: Uint8Array,
    x: number,
    gamma: number,
    beta: number,
    y: number,
    mean: number,
    rstd: number,
    rows: number,
    cols: number,
    eps: number,
  ): void;
  /** LayerNorm's gradients: dx [rows, cols], dgamma and dbeta [cols]. */
  LayerNormGrad(
    heap: Uint8Array,
    dy: number,
    x: number,
    mean: number,
    rstd: number,
    gamma: number,
    dx: number,
    dgamma: number,
    dbeta: number,
    rows: number,
    cols: number,
  ): void;
  /** y = x·Φ(x) over n values (erf form). */
  Gelu(heap: Uint8Array, x: number, y: number, n: number): void;
  /** dx = dy·(Φ(x) + x·φ(x)) over n values. */
  GeluGrad(heap: Uint8Array, dy: number, x: number, dx: number, n: number): void;
  /** dx = dy where x > 0, NaN where x is NaN, dy·0 elsewhere (dy·step(x) in one pass) over n values. */
  ReluGrad(heap: Uint8Array, dy: number, x: number, dx: number, n: number): void;
  /** Softmax of x [rows, cols] over cols. */
  Softmax(heap: Uint8Array, x: number, y: number, rows: number, cols: number): void;
  /** dx = y·(dy − Σ dy·y) over cols, from softmax's output y. */
  SoftmaxGrad(heap: Uint8Array, dy: number, y: number, dx: number, rows: number, cols: number): void;
  /** y[o, c, i] = x[o, c, i] + bias[c], x and y [outer, channels, inner] (NCHW: [N, C, H·W]; NHWC: [N·H·W, C, 1]). */
  BiasAdd(heap: Uint8Array, x: number, bias: number, y: number, outer: number, channels: number, inner: number): void;
  /** out[c] = Σ over o and i of x[o, c, i] (a bias gradient): float lanes within a row, rows added in double. */
  ChannelSum(heap: Uint8Array, x: number, out: number, outer: number, channels: number, inner: number): void;
  /** y = exp(x) over n float32 values. */
  Exp(heap: Uint8Array, x: number, y: number, n: number): void;
  /**
   * y = x rounded to bfloat16 (float16 when `float16`) and widened back to float32 over n values, y = x
   * allowed: the bits of PyTorch's `x.to(dtype).float()` (round to nearest even, subnormals, overflow to
   * inf; NaN becomes 0xFFFF0000 for bfloat16, ±0x7FC00000 for float16).
   */
  RoundToHalf(heap: Uint8Array, x: number, y: number, n: number, float16: boolean): void;
  /** Sets OpenBLAS's thread count for this process; returns the count in effect. */
  setThreads(n: number): number;
  /** OpenBLAS's build description (version, build target, MAX_THREADS). */
  library(): string;
  /** The kernel set OpenBLAS runs, chosen at load (e.g. 'SkylakeX'; 'Prescott' when it did not know the CPU). */
  blasCore(): string;
}

/** n, h, w, ci, kh, kw, co, strideH, strideW, dilationH, dilationW, padTop, padLeft, outH, outW, channelsFirst. */
export type ConvGeometry = [
  n: number,
  h: number,
  w: number,
  ci: number,
  kh: number,
  kw: number,
  co: number,
  strideH: number,
  strideW: number,
  dilationH: number,
  dilationW: number,
  padTop: number,
  padLeft: number,
  outH: number,
  outW: number,
  channelsFirst: boolean,
];

export type NativeKernelsLoad = { kernels: NativeKernels; reason?: undefined } | { kernels: null; reason: string };

let loaded: NativeKernelsLoad | undefined;

/**
 * How many times an idle OpenMP thread (oneDNN's and the fused kernels') polls for work before it
 * sleeps, unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT). libgomp's default (300 000)
 * kept both threads busy between calls: a 2-thread conv loop used 5× the CPU time of 1 thread on a
 * loaded host (110 vs 19 ticks; 24 with 10 000), time taken from other processes and ranks.
 */
export const GOMP_SPINCOUNT = '10000';

/** Sets GOMP_SPINCOUNT in `env` where the user set no OpenMP wait policy; libgomp reads it when the addon loads it. */
export function limitOpenMPSpin(env: NodeJS.ProcessEnv = process.env): void {
  if (env.OMP_WAIT_POLICY === undefined && env.GOMP_SPINCOUNT === undefined) env.GOMP_SPINCOUNT = GOMP_SPINCOUNT;
}

/** The addon, or null and why not (the install script's reason, or the load error). */
export function loadNativeKernels(): NativeKernelsLoad {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  limitOpenMPSpin();
  chooseOpenBLASCore();
  try {
    loaded = { kernels: require('../build/Release/ddp_kernels.node') as NativeKernels };
  } catch (err) {
    let reason: string;
    try {
      reason = `addon not built: ${readFileSync(new URL('../build/not-built.txt', import.meta.url), 'utf8').trim()}`;
    } catch {
      const { code, message } = err as NodeJS.ErrnoException;
      // no not-built.txt: the install script never ran (pnpm 10 runs only the build scripts it was allowed)
      reason =
        code === 'MODULE_NOT_FOUND'
          ? 'addon not built: its install script never ran; with pnpm 10, `pnpm approve-builds` or list ' +
            '@ddp/native-kernels under onlyBuiltDependencies, then `pnpm rebuild @ddp/native-kernels`'
          : `addon failed to load: ${message.split('\n')[0]}`;
    }
    loaded = { kernels: null, reason };
  }
  return loaded;
}
