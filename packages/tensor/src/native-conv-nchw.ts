import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { convGeometry } from './native-conv.js';
import { convTakesNCHW, nativeKernels } from './native-kernels.js';
import { activeWasmBackend, heapOffset } from './wasm-heap.js';

/** Stride and zero padding per spatial dim, [height, width]. */
export interface Conv2dSpec {
  strides: [number, number];
  padding: [number, number];
}

/** Where the NCHW convolution runs natively: the backend, the addon and the heap offsets of `tensors`; else null. */
function direct(tensors: tf.Tensor[]) {
  const native = nativeKernels();
  const backend = convTakesNCHW() ? activeWasmBackend() : null;
  if (!native || !backend || tensors.some((t) => t.dtype !== 'float32')) return null;
  const offsets = tensors.map((t) => heapOffset(backend, t));
  return offsets.every((o) => o !== null) ? { native, backend, offsets: offsets as number[] } : null;
}

/** The geometry of x [N, C, H, W] against weight [O, C, kH, kW], as tfjs computes it. */
function geometry(x: tf.Tensor, weight: tf.Tensor, { strides, padding: [ph, pw] }: Conv2dSpec) {
  const [o, c, kh, kw] = weight.shape;
  const pad = [
    [0, 0],
    [0, 0],
    [ph, ph],
    [pw, pw],
  ] as tf.backend_util.ExplicitPadding;
  const info = tf.backend_util.computeConv2DInfo(
    x.shape as [number, number, number, number],
    [kh, kw, c, o],
    strides,
    1,
    pad,
    undefined,
    false,
    'channelsFirst',
  );
  return convGeometry(info, true);
}

/** A number per tensor data (dataId), never reused: the addon's token for "the same x as in forward". */
const tokens = new WeakMap<object, number>();
let lastToken = 0;
function tokenOf(t: tf.Tensor): number {
  const known = tokens.get(t.dataId);
  if (known !== undefined) return known;
  tokens.set(t.dataId, ++lastToken);
  return lastToken;
}

const valid = (x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null) =>
  x.rank === 4 && weight.rank === 4 && x.shape[1] === weight.shape[1] && (!bias || bias.size === weight.shape[0]);

/**
 * F.conv2d as ATen runs it on the CPU: x [N, C, H, W], weight [O, C, kH, kW] (PyTorch's layouts, no
 * transposes) and the bias added by the oneDNN convolution itself, in one native call. null where
 * the native convolutions are off or a tensor is not float32 on the wasm heap (the caller runs tfjs's).
 */
export function nativeConv2d(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null, spec: Conv2dSpec) {
  if (!valid(x, weight, bias)) return null;
  const run = direct(bias ? [x, weight, bias] : [x, weight]);
  if (!run) return null;
  const g = geometry(x, weight, spec);
  const y = makeAlignedOutput(run.backend, [g[0], g[6], g[13], g[14]]);
  const [xo, wo, bo = -1] = run.offsets;
  // read the heap after makeOutput: an allocation may have replaced it
  run.native.ConvForward(run.backend.wasm.HEAPU8, xo, wo, bo, heapOffset(run.backend, y)!, tokenOf(x), ...g);
  return tf.engine().makeTensorFromTensorInfo(y);
}

/** nativeConv2d's gradients; dx and dBias null where not asked for. */
export interface Conv2dGrads {
  dx: tf.Tensor | null;
  dWeight: tf.Tensor;
  dBias: tf.Tensor | null;
}

/**
 * nativeConv2d's gradients from its x, weight and dy in one native call (dy reordered once for
 * both passes, the bias gradient summed by the filter pass, x not reordered again when the
 * forward's reorder of the same data is still in its buffer); null where nativeConv2d would be.
 */
export function nativeConv2dGrads(
  x: tf.Tensor,
  weight: tf.Tensor,
  dy: tf.Tensor,
  spec: Conv2dSpec,
  wants: { dx: boolean; dBias: boolean },
): Conv2dGrads | null {
  if (!valid(x, weight, null)) return null;
  const run = direct([x, weight, dy]);
  if (!run) return null;
  const g = geometry(x, weight, spec);
  if (!tf.util.arraysEqual(dy.shape, [g[0], g[6], g[13], g[14]])) return null;
  const make = (shape: number[]) => makeAlignedOutput(run.backend, shape);
  const [dx, dWeight, dBias] = [wants.dx ? make(x.shape) : null, make(weight.shape), wants.dBias ? make([g[6]]) : null];
  const at = (t: tf.TensorInfo | null) => (t ? heapOffset(run.backend, t)! : -1);
  const [xo, wo, dyo] = run.offsets as [number, number, number];
  const heap = run.backend.wasm.HEAPU8;
  run.native.ConvBackward(heap, xo, wo, dyo, at(dx), at(dWeight), at(dBias), tokenOf(x), ...g);
  const tensor = (t: tf.TensorInfo | null) => t && tf.engine().makeTensorFromTensorInfo(t);
  return { dx: tensor(dx), dWeight: tensor(dWeight)!, dBias: tensor(dBias) };
}
