import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isMainThread } from 'node:worker_threads';

/** The native addon's functions (src/shm.cc). */
export interface SharedMemory {
  /** Creates or opens /dev/shm/<name> (name starts with '/'), reserves `bytes` and maps it. */
  map(name: string, bytes: number): SharedArrayBuffer;
  /** Removes the name; existing mappings stay valid. Missing names are not an error. */
  unlink(name: string): void;
  /** Wakes every waiter, in any process, on the 32-bit word at byteOffset. */
  wake(sab: SharedArrayBuffer, byteOffset: number): number;
  /**
   * Sleeps (on libuv's thread pool, not the caller's thread) while the word at byteOffset
   * equals `expected`: resolves false when woken or changed, true when timeoutMs passed.
   */
  wait(sab: SharedArrayBuffer, byteOffset: number, expected: number, timeoutMs: number): Promise<boolean>;
  /** As wait, blocking the calling thread (a wake-up costs one context switch, not three). */
  waitSync(sab: SharedArrayBuffer, byteOffset: number, expected: number, timeoutMs: number): boolean;
  /**
   * dst[i] = dst[i] ⊕ src[i] (op 0 sum, 1 product, 2 max, 3 min) in vectorised C: the same
   * results as the JavaScript loop (NaN propagates; int32 wraps), 5–10× faster. With `out`,
   * out[i] = dst[i] ⊕ src[i] and dst stays (one pass where a copy and a reduce took two).
   */
  reduce<T extends Float32Array | Float64Array | Int32Array>(dst: T, src: T, op: 0 | 1 | 2 | 3, out?: T): void;
  /**
   * values[i] /= divisor in place, in vectorised C, bit-identical to JavaScript's division
   * stored back; false when some quotient is ±Infinity (AVG's overflow fallback looks then).
   */
  divide(values: Float32Array | Float64Array, divisor: number): boolean;
  /**
   * dst.set(src) for typed arrays of one byte length; from 256 KiB with non-temporal stores
   * (the destination is not read first, nor kept in cache): for streaming copies.
   */
  copyStreaming(dst: ArrayBufferView, src: ArrayBufferView): void;
  /**
   * A small all-reduce among the ranks of one host, in one call (src/exchange.cc): copies
   * `data` into this rank's slot of `sab`, publishes it, spins (params' budget) until every
   * peer published the same collective, reduces every slot into `data`. `params` holds the
   * segment's layout, the op and its phase (@ddp/comm's transport/shm-exchange.ts fills it).
   * 0 done; 1 the budget ran out waiting on the peer in params (call again to go on); 2 that
   * peer called another collective.
   */
  exchange(
    sab: SharedArrayBuffer,
    params: Int32Array,
    data: Float32Array | Float64Array | Int32Array | Uint16Array,
  ): 0 | 1 | 2;
  /**
   * A SharedArrayBuffer over the same bytes as `buffer` (all of them, as long as they are now):
   * another thread can then use memory V8 does not share, such as the wasm heap. It keeps
   * that memory alive, even once `buffer` is detached.
   */
  aliasShared(buffer: ArrayBuffer): SharedArrayBuffer;
  /** Where the bytes of a buffer start in this process (a wasm memory grown in place keeps it). */
  address(buffer: ArrayBuffer | SharedArrayBuffer): number;
  /** Whether no value is NaN or ±Infinity, in vectorised C. */
  allFinite(values: Float32Array): boolean;
  /** allFinite on libuv's thread pool (the caller's thread goes on); do not write `values` until it settles. */
  allFiniteAsync(values: Float32Array): Promise<boolean>;
}

let loaded: SharedMemory | null | undefined;

/**
 * Said once per process when the install script never ran: pnpm 10 skips dependencies' build
 * scripts unless they are allowed, and only prints "Ignored build scripts" at install time.
 */
const SCRIPT_NEVER_RAN =
  '@ddp/shm was never built: its install script did not run (pnpm 10 runs only allowed build scripts: ' +
  '`pnpm approve-builds`, or list @ddp/shm under onlyBuiltDependencies in pnpm-workspace.yaml, then ' +
  '`pnpm rebuild @ddp/shm`). Until then ranks on one host talk over Unix sockets.';

/** The addon, or null where it was not built (not Linux, no compiler): callers fall back to sockets. */
export function loadSharedMemory(): SharedMemory | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('../build/Release/ddp_shm.node') as SharedMemory;
    } catch {
      loaded = null;
      const installRan = existsSync(new URL('../build/not-built.txt', import.meta.url));
      // the main thread says it (comm's worker thread loads the addon too: it was said twice)
      if (process.platform === 'linux' && !installRan && isMainThread)
        process.emitWarning(SCRIPT_NEVER_RAN, { code: 'DDP_SHM_NOT_BUILT' });
    }
  }
  return loaded;
}
export { aliasGrowingHeap, growingHeapMoved } from './heap-alias.js';
