import { afterAll } from 'vitest';
import { getBackend, setBackend, type tf, useNativeKernels } from '../index.js';

/** The kernel paths a correction must hold on: wasm alone, wasm with the native kernels, cpu. */
export const BACKEND_PATHS = [
  ['wasm', false],
  ['wasm', true],
  ['cpu', false],
] as const;

/**
 * Puts the backend and the native kernels back as they were once the file's tests are done;
 * returns whether the native kernels are there (a native path is skipped without them).
 */
export function restoreBackendAfterAll(): boolean {
  const initial = getBackend();
  const native = useNativeKernels(true);
  afterAll(async () => {
    useNativeKernels(true);
    await setBackend(initial as 'wasm');
  });
  return native;
}

/** A tensor's values as a plain array. */
export const values = (t: tf.Tensor) => Array.from(t.dataSync() as ArrayLike<number>);
