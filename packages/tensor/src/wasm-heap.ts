import type { DataId, TensorInfo } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';

/** What tfjs-backend-wasm keeps per tensor (internals of tfjs 4.x, checked at run time). */
export interface WasmBackend {
  /** The Emscripten module: HEAPU8 is replaced when the memory grows, so read it after any allocation. */
  wasm: {
    HEAPU8: Uint8Array;
    _malloc(bytes: number): number;
    _free(offset: number): void;
    /** The module's wasm exports (Emscripten's `Module.asm`). */
    asm?: { free?(offset: number): void };
  };
  /** refCount > 1: storage shared by several tensors (reshape and its kin). */
  dataIdMap: { get(id: DataId): { memoryOffset: number | null; refCount: number } | undefined };
  /** memoryOffset: data allocated by the caller (with wasm._malloc: disposing the tensor frees it). */
  makeOutput(shape: number[], dtype: 'float32' | 'int32' | 'bool', memoryOffset?: number): TensorInfo;
}

/** The active backend as tfjs-wasm's internals, or null when it is another backend. */
export function activeWasmBackend(): WasmBackend | null {
  return tf.getBackend() === 'wasm' ? asWasmBackend(tf.backend()) : null;
}

/** `backend` as tfjs-wasm's internals, or null when it lacks them. */
export function asWasmBackend(backend: unknown): WasmBackend | null {
  const b = backend as Partial<WasmBackend>;
  return b.wasm?.HEAPU8 && b.dataIdMap && typeof b.makeOutput === 'function' ? (b as WasmBackend) : null;
}

/** Byte offset of a tensor's data in the wasm heap, or null (strings, other backends' data). */
export function heapOffset(backend: WasmBackend, t: TensorInfo): number | null {
  const offset = backend.dataIdMap.get(t.dataId)?.memoryOffset;
  return typeof offset === 'number' ? offset : null;
}

/** The wasm heap's current ArrayBuffer (replaced when the memory grows), or null off wasm. */
export const wasmHeapBuffer = (): ArrayBuffer | null =>
  (activeWasmBackend()?.wasm.HEAPU8.buffer as ArrayBuffer | undefined) ?? null;
