import type { NativeKernels } from '@ddp/native-kernels';
import type { KernelFunc, TensorInfo, TileAttrs } from '@tensorflow/tfjs-core';
import { asWasmBackend, heapOffset } from './wasm-heap.js';

const ELEMENT_BYTES: Partial<Record<string, 1 | 4>> = { float32: 4, int32: 4, bool: 1 };
/** The addon's Tile takes ranks 1–9 (tile.cc): `expand` of a rank-10 tensor raised its argument error (probe DI). */
const MAX_RANK = 9;

/**
 * Tile (also what tf.broadcastTo runs) through the addon, whole inner blocks copied at once:
 * tfjs-wasm's took 3–12 ms to spread one value over the [8, 4, 32, 32] attention mask of
 * `pnpm bench kernels`' transformer. Other dtypes (strings, complex) and ranks above 9 go to `fallback`.
 */
export function nativeTile(native: NativeKernels, fallback: KernelFunc): KernelFunc {
  return (args) => {
    const backend = asWasmBackend(args.backend);
    const x = args.inputs.x as TensorInfo;
    const { reps } = args.attrs as unknown as TileAttrs;
    const bytes = ELEMENT_BYTES[x.dtype];
    const xOffset = backend && bytes ? heapOffset(backend, x) : null;
    const rank = x.shape.length;
    if (!backend || !bytes || xOffset === null || reps.length !== rank || rank === 0 || rank > MAX_RANK)
      return fallback(args);
    const out = backend.makeOutput(
      x.shape.map((d, i) => d * reps[i]),
      x.dtype as 'float32' | 'int32' | 'bool',
    );
    // read the heap after makeOutput: an allocation may have replaced it
    native.Tile(backend.wasm.HEAPU8, xOffset, heapOffset(backend, out)!, bytes, x.shape.length, ...x.shape, ...reps);
    return out;
  };
}
