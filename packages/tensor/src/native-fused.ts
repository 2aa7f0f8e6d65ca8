import type { NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { makeAlignedOutput } from './aligned-output.js';
import { BackendError } from './errors.js';
import { asWasmBackend, heapOffset, type WasmBackend } from './wasm-heap.js';

/**
 * The fused ops' kernels (fused-ops.ts), registered for the wasm backend while the native
 * kernels are on: no wasm kernel to replace, so fused-ops.ts runs tfjs ops where they are not
 * registered. Inputs in kernel order, every one float32 and non-empty (fused-ops.ts checks).
 */
export const FUSED_KERNELS = {
  DdpLayerNorm: ['x', 'gamma', 'beta'],
  DdpLayerNormGrad: ['dy', 'x', 'mean', 'rstd', 'gamma'],
  DdpGelu: ['x'],
  DdpGeluGrad: ['dy', 'x'],
  DdpReluGrad: ['dy', 'x'],
  DdpSoftmax: ['x'],
  DdpSoftmaxGrad: ['dy', 'y'],
  DdpBiasAdd: ['x', 'bias'],
  DdpChannelSum: ['x'],
  DdpRoundToHalf: ['x'],
} as const;

export type FusedKernelName = keyof typeof FUSED_KERNELS;

/** Allocates the outputs, then (the heap may have grown) returns the heap and every offset: inputs', then outputs'. */
function place(backend: WasmBackend, inputs: TensorInfo[], outShapes: number[][]) {
  const outs = outShapes.map((s) => makeAlignedOutput(backend, s));
  const offsets = [...inputs, ...outs].map((t) => heapOffset(backend, t));
  if (offsets.some((o) => o === null))
    throw new BackendError('fused kernel: a float32 tensor has no wasm heap storage');
  return { heap: backend.wasm.HEAPU8, offsets: offsets as number[], outs };
}

/** Rows and columns of a tensor seen as [rows, last axis]; a 0-d tensor is one row of one element. */
function rowsCols(shape: number[]): [number, number] {
  const cols = shape.length > 0 ? shape[shape.length - 1] : 1;
  return [tf.util.sizeFromShape(shape) / cols, cols];
}

/** A shape seen as [outer, channels, inner] around its axis `axis`. */
export function aroundAxis(shape: number[], axis: number): [number, number, number] {
  const size = (s: number[]) => tf.util.sizeFromShape(s);
  return [size(shape.slice(0, axis)), shape[axis], size(shape.slice(axis + 1))];
}

/** The kernel function of fused kernel `name` over the addon's function of the same name without "Ddp". */
export function fusedKernel(native: NativeKernels, name: FusedKernelName): KernelFunc {
  return (args) => {
    const backend = asWasmBackend(args.backend);
    if (!backend) throw new BackendError(`${name}: registered for wasm, ran on another backend`);
    const inputs = FUSED_KERNELS[name].map((k) => args.inputs[k] as TensorInfo);
    if (name === 'DdpBiasAdd' || name === 'DdpChannelSum') {
      const [outer, channels, inner] = aroundAxis(inputs[0].shape, (args.attrs as { axis: number }).axis);
      const add = name === 'DdpBiasAdd';
      const { heap, offsets: o, outs } = place(backend, inputs, [add ? inputs[0].shape : [channels]]);
      if (add) native.BiasAdd(heap, o[0], o[1], o[2], outer, channels, inner);
      else native.ChannelSum(heap, o[0], o[1], outer, channels, inner);
      return outs[0];
    }
    const first = ['DdpLayerNorm', 'DdpGelu', 'DdpSoftmax', 'DdpRoundToHalf'].includes(name);
    const x = inputs[first ? 0 : 1];
    const [rows, cols] = rowsCols(x.shape);
    const size = rows * cols;
    if (name === 'DdpLayerNorm') {
      const rowShape = [...x.shape.slice(0, -1), 1];
      const { heap, offsets: o, outs } = place(backend, inputs, [x.shape, rowShape, rowShape]);
      native.LayerNorm(heap, o[0], o[1], o[2], o[3], o[4], o[5], rows, cols, (args.attrs as { eps: number }).eps);
      return outs;
    }
    if (name === 'DdpLayerNormGrad') {
      const { heap, offsets: o, outs } = place(backend, inputs, [x.shape, [cols], [cols]]);
      native.LayerNormGrad(heap, o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], rows, cols);
      return outs;
    }
    const { heap, offsets: o, outs } = place(backend, inputs, [x.shape]);
    if (name === 'DdpRoundToHalf')
      native.RoundToHalf(heap, o[0], o[1], size, (args.attrs as { float16: boolean }).float16);
    else if (name === 'DdpGelu') native.Gelu(heap, o[0], o[1], size);
    else if (name === 'DdpGeluGrad') native.GeluGrad(heap, o[0], o[1], o[2], size);
    else if (name === 'DdpReluGrad') native.ReluGrad(heap, o[0], o[1], o[2], size);
    else if (name === 'DdpSoftmax') native.Softmax(heap, o[0], o[1], rows, cols);
    else native.SoftmaxGrad(heap, o[0], o[1], o[2], rows, cols);
    return outs[0];
  };
}

/**
 * Runs fused kernel `name` when it is registered for the active backend and every input is
 * non-empty float32; null otherwise (the caller runs its tfjs ops).
 */
export function runFused(name: FusedKernelName, inputs: tf.Tensor[], attrs: tf.NamedAttrMap = {}): tf.Tensor[] | null {
  if (!tf.getKernel(name, tf.getBackend())) return null;
  if (inputs.some((t) => t.dtype !== 'float32' || t.size === 0)) return null;
  const named = Object.fromEntries(FUSED_KERNELS[name].map((k, i) => [k, inputs[i]]));
  const out = tf.engine().runKernel(name, named, attrs) as tf.Tensor | tf.Tensor[];
  return Array.isArray(out) ? out : [out];
}
