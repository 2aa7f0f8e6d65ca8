import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { BackendError } from './errors.js';
import { announceNativeKernels, initNativeKernels } from './native-kernels.js';
import { registerWasmFallbacks } from './wasm-fallbacks.js';

export { BackendError };

export type BackendName = 'tensorflow' | 'wasm' | 'cpu';
const BACKENDS: readonly string[] = ['tensorflow', 'wasm', 'cpu'];

const require = createRequire(import.meta.url);

// At import, so the fallbacks are there however wasm gets selected (also by tf.setBackend);
// the native kernels wrap whatever wasm kernels are registered by then.
registerWasmFallbacks();
initNativeKernels();

/** Native bindings register the 'tensorflow' backend when their package is installed. */
async function tryNative(): Promise<boolean> {
  for (const name of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
    try {
      await import(name);
      return true;
    } catch {
      // not installed: fall through to the next candidate
    }
  }
  return false;
}

let wasmPathsSet = false;
function prepareWasm(): void {
  if (wasmPathsSet) return;
  // Node has no fetch of relative URLs: point the wasm loader at the package's files.
  const dist = dirname(require.resolve('@tensorflow/tfjs-backend-wasm'));
  setWasmPaths(`${dist}/`);
  wasmPathsSet = true;
}

/**
 * Runs `start` and then removes the process listeners it added. tfjs-backend-wasm's Emscripten
 * glue adds two that rethrow every uncaught exception and unhandled rejection from inside
 * itself, so Node printed the glue's 36 kB minified source line before the user's error (and
 * exited 7, not 1). They only serve Emscripten's exit(), which tfjs never calls.
 */
async function withoutGlueListeners(start: () => Promise<void>): Promise<void> {
  const uncaught = new Set(process.listeners('uncaughtException'));
  const rejection = new Set(process.listeners('unhandledRejection'));
  try {
    await start();
  } finally {
    for (const l of process.listeners('uncaughtException')) if (!uncaught.has(l)) process.off('uncaughtException', l);
    for (const l of process.listeners('unhandledRejection'))
      if (!rejection.has(l)) process.off('unhandledRejection', l);
  }
}

/** Switches the tfjs backend; throws if it cannot be initialised. */
export async function setBackend(name: BackendName): Promise<void> {
  if (!BACKENDS.includes(name))
    throw new BackendError(`unknown backend '${name}' (expected one of ${BACKENDS.join(', ')})`);
  if (name === 'tensorflow' && !(await tryNative())) {
    throw new BackendError("backend 'tensorflow' needs @tensorflow/tfjs-node or @tensorflow/tfjs-node-gpu installed");
  }
  if (name === 'wasm') prepareWasm();
  await withoutGlueListeners(async () => {
    const ok = await tf.setBackend(name);
    if (!ok) throw new BackendError(`tfjs backend '${name}' failed to initialise`);
    await tf.ready();
  });
}

/** The active backend's name, e.g. 'cpu', 'wasm' or 'tensorflow'. */
export function getBackend(): string {
  return tf.getBackend();
}

/**
 * DDP_BACKEND overrides; otherwise native when installed, else `defaultBackend`: wasm, which
 * measured about 6x faster than cpu on small-model training work (numbers in the README).
 */
export async function initBackend(defaultBackend: BackendName = 'wasm'): Promise<string> {
  const requested = process.env.DDP_BACKEND;
  if (requested) {
    if (!BACKENDS.includes(requested)) {
      throw new BackendError(`DDP_BACKEND=${requested} is not a backend (expected one of ${BACKENDS.join(', ')})`);
    }
    await setBackend(requested as BackendName);
  } else if (await tryNative()) await setBackend('tensorflow');
  else await setBackend(defaultBackend);
  if (getBackend() === 'wasm') announceNativeKernels();
  return getBackend();
}
