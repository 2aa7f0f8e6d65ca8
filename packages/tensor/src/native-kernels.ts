import { availableParallelism } from 'node:os';
import type { NativeKernels, NativeKernelsLoad } from '@ddp/native-kernels';
import type { KernelConfig, KernelFunc } from '@tensorflow/tfjs-core';
import * as tf from '@tensorflow/tfjs-core';
import { BackendError } from './errors.js';
import { nativeConv } from './native-conv.js';
import { nativeExp } from './native-exp.js';
import { FUSED_KERNELS, type FusedKernelName, fusedKernel } from './native-fused.js';
import { nativeBatchMatMul } from './native-matmul.js';
import { nativeSum } from './native-reduce.js';
import { nativeTile } from './native-tile.js';

/** The optional addon (@ddp/native-kernels), loaded once; null with the reason where it is not there. */
const load: NativeKernelsLoad = await import('@ddp/native-kernels').then(
  (m) => m.loadNativeKernels(),
  () => ({ kernels: null, reason: '@ddp/native-kernels is not installed' }),
);

/** The wasm kernels the addon replaces, each given the kernel it replaces for what it does not handle. */
const NATIVE: Record<string, (native: NativeKernels, fallback: KernelFunc) => KernelFunc> = {
  BatchMatMul: nativeBatchMatMul,
  Conv2D: (native, fallback) => nativeConv('Conv2D', native, fallback),
  Conv2DBackpropInput: (native, fallback) => nativeConv('Conv2DBackpropInput', native, fallback),
  Conv2DBackpropFilter: (native, fallback) => nativeConv('Conv2DBackpropFilter', native, fallback),
  Sum: nativeSum,
  Tile: nativeTile,
  Exp: nativeExp,
};

/** The wasm kernels in place before the native ones were registered (empty while they are not). */
const replaced = new Map<string, KernelConfig>();
/** The fused kernels registered for wasm (none while the native kernels are off). */
const fused = new Set<FusedKernelName>();

/** The addon's functions, or null where it is not there (also while they are switched off: check replacedKernels). */
export function nativeKernels(): NativeKernels | null {
  return load.kernels;
}

/** How many wasm kernels the native ones replace now (0: off). */
export function replacedKernels(): number {
  return replaced.size;
}

/**
 * Registers the native kernels for the wasm backend (on) or restores the kernels they replaced
 * (off). Returns whether they are on: never where the addon is missing. Tests and benchmarks
 * switch within one process; DDP_NATIVE=0 keeps them off from the start.
 */
export function useNativeKernels(on: boolean): boolean {
  const native = load.kernels;
  if (!native || on === replaced.size > 0) return replaced.size > 0;
  for (const [name, make] of Object.entries(NATIVE)) {
    if (on) {
      const existing = tf.getKernel(name, 'wasm') as KernelConfig | undefined;
      if (!existing) continue;
      tf.unregisterKernel(name, 'wasm');
      // the replaced kernel's setupFunc stays: it binds the wasm function the fallback calls
      tf.registerKernel({ ...existing, kernelFunc: make(native, existing.kernelFunc) });
      replaced.set(name, existing);
    } else {
      tf.unregisterKernel(name, 'wasm');
      tf.registerKernel(replaced.get(name)!);
    }
  }
  for (const name of Object.keys(FUSED_KERNELS) as FusedKernelName[]) {
    if (on) {
      tf.registerKernel({ kernelName: name, backendName: 'wasm', kernelFunc: fusedKernel(native, name) });
      fused.add(name);
    } else tf.unregisterKernel(name, 'wasm');
  }
  if (!on) {
    replaced.clear();
    fused.clear();
  }
  return replaced.size > 0;
}

/**
 * Whether Conv2D and its gradients on the active backend take NCHW activations (dataFormat
 * 'NCHW') without transposes: the native ones do; tfjs's take NHWC only.
 */
export function convTakesNCHW(): boolean {
  return replaced.has('Conv2D') && tf.getBackend() === 'wasm';
}

/**
 * Threads per process, as PyTorch: DDP_NUM_THREADS, else OMP_NUM_THREADS (what torchrun
 * sets), else the cores shared among the host's ranks (LOCAL_WORLD_SIZE), at least 1.
 */
export function defaultNumThreads(env: NodeJS.ProcessEnv = process.env): number {
  const own = env.DDP_NUM_THREADS;
  if (own !== undefined) {
    if (!/^[1-9]\d*$/.test(own)) throw new BackendError(`DDP_NUM_THREADS=${own} is not a positive integer`);
    return Number(own);
  }
  const omp = Number.parseInt(env.OMP_NUM_THREADS ?? '', 10); // "4,2" (nested levels) counts as 4
  if (omp >= 1) return omp;
  const ranks = Number.parseInt(env.LOCAL_WORLD_SIZE ?? '', 10);
  return Math.max(1, Math.floor(availableParallelism() / Math.max(1, ranks || 1)));
}

let threads = 0;

/** Sets the native kernels' thread count (torch.set_num_threads); a no-op without the addon. */
export function setNumThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new BackendError(`setNumThreads: ${n} is not a positive integer`);
  threads = load.kernels ? load.kernels.setThreads(n) : n;
}

/** The native kernels' thread count (torch.get_num_threads). */
export function getNumThreads(): number {
  return threads;
}

/** One line on what runs natively, or why nothing does. */
export function nativeKernelsSummary(): string {
  if (!load.kernels) return `ddp: native kernels off (${load.reason})`;
  if (replaced.size === 0) return 'ddp: native kernels off (DDP_NATIVE=0)';
  const library = `${load.kernels.library().split(' ').slice(0, 2).join(' ')} ${load.kernels.blasCore()}`;
  return (
    `ddp: native kernels on (${library} and oneDNN, ${threads} thread${threads === 1 ? '' : 's'}): ` +
    `${[...replaced.keys(), ...fused].join(', ')}`
  );
}

let announced = false;

/** Prints nativeKernelsSummary to stderr, once per process. */
export function announceNativeKernels(): void {
  if (announced) return;
  announced = true;
  process.stderr.write(`${nativeKernelsSummary()}\n`);
}

/** At import: threads from the environment, kernels on unless DDP_NATIVE=0. */
export function initNativeKernels(): void {
  setNumThreads(defaultNumThreads());
  if (process.env.DDP_NATIVE !== '0') useNativeKernels(true);
}
