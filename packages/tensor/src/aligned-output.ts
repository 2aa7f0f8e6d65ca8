import type { TensorInfo } from '@tensorflow/tfjs-core';
import type { WasmBackend } from './wasm-heap.js';

/**
 * Cache-line alignment for native kernels' float32 outputs. tfjs-wasm's malloc returns 8-byte
 * aligned blocks, so a row of a product's output usually starts mid cache line and every
 * 64-byte vector store of the BLAS's AVX-512 kernel touches two lines: the weight gradient of
 * a 32-row layer ([2048, 32]ᵀ·[32, 2048], store-bound) ran at 0.82–0.89× PyTorch's GFLOP/s,
 * whose allocator aligns to 64 bytes as this does.
 */
export const OUTPUT_ALIGNMENT = 64;

/** Allocation start of each aligned block that does not start there (what _free must be given). */
const blockOf = new Map<number, number>();
const patched = new WeakSet<object>();

/**
 * The module's _free, made to free an aligned output by its allocation's start. tfjs-wasm frees
 * tensor memory only from JavaScript (disposeData → wasm._free), so this sees every such free.
 * The wrapped function is the wasm export itself: Emscripten's `_free` is a stub that replaces
 * `Module._free` with the export on its first call, which would drop a wrapper around the stub.
 */
function freeAlignedBlocks(wasm: WasmBackend['wasm']): void {
  if (patched.has(wasm)) return;
  patched.add(wasm);
  const free = wasm.asm?.free ?? wasm._free;
  wasm._free = (offset: number) => {
    const block = blockOf.get(offset);
    if (block !== undefined) blockOf.delete(offset);
    free(block ?? offset);
  };
}

/** A float32 output tensor whose data starts on a 64-byte boundary of the wasm heap. */
export function makeAlignedOutput(backend: WasmBackend, shape: number[]): TensorInfo {
  freeAlignedBlocks(backend.wasm);
  const bytes = shape.reduce((a, b) => a * b, 1) * 4;
  // `>>> 0`: _malloc returns a signed int32 above 2 GB, as tfjs-wasm's own allocation notes
  const block = backend.wasm._malloc(bytes + OUTPUT_ALIGNMENT - 1) >>> 0;
  if (block === 0) return backend.makeOutput(shape, 'float32'); // tfjs's own allocation reports running out
  const offset = Math.ceil(block / OUTPUT_ALIGNMENT) * OUTPUT_ALIGNMENT;
  if (offset !== block) blockOf.set(offset, block);
  return backend.makeOutput(shape, 'float32', offset);
}
