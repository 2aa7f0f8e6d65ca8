import { aliasGrowingHeap, growingHeapMoved, loadSharedMemory } from '@ddp/shm';
import { ownedHeapView, type tf, wasmHeapBuffer } from '@ddp/tensor';
import { GradientStorageMovedError } from './errors.js';

/**
 * Gradients reduced where they live. A gradient autograd made sits in the wasm heap, an
 * ordinary ArrayBuffer the comm thread cannot see; @ddp/shm's heap alias (shared with FSDP)
 * gives a SharedArrayBuffer over the same bytes, which the comm thread can read and write in
 * place, while the heap stays where it is. The address is checked after every reduction.
 * Without the addon, or once the heap moved, DDP says so once and copies gradients into its buckets.
 */

/** Set once DDP went back to copying (said once). */
let copying = false;

function giveUp(why: string): null {
  copying = true;
  process.emitWarning(`DistributedDataParallel copies gradients into its buckets from now on: ${why}`, {
    code: 'DDP_GRADIENT_COPIES',
  });
  return null;
}

const MOVED = 'the wasm heap moved when it grew';

/** A SharedArrayBuffer over the whole current heap, or null. */
function sharedHeap(heap: ArrayBuffer): SharedArrayBuffer | null {
  if (copying) return null;
  const shared = aliasGrowingHeap(heap);
  if (shared instanceof SharedArrayBuffer) return shared;
  return giveUp(shared === 'no-addon' ? 'the @ddp/shm addon is not built' : MOVED);
}

/**
 * `grad`'s own values as an array over shared memory (the comm thread may reduce them in
 * place), or null: not a float32 tensor alone in its wasm storage (other backends, a
 * reshape sharing it), no addon, or the heap moved once.
 */
export function sharedGradientView(grad: tf.Tensor): Float32Array | null {
  const own = ownedHeapView(grad);
  const shared = own && sharedHeap(own.buffer as ArrayBuffer);
  return shared ? new Float32Array(shared, own.byteOffset, own.length) : null;
}

/**
 * Raises GradientStorageMovedError when the heap is no longer where the views made by
 * sharedGradientView point: a reduction written there never reached the gradients.
 */
export function checkHeapUnmoved(rank: number, iteration: number): void {
  if (!growingHeapMoved(wasmHeapBuffer())) return;
  giveUp(MOVED);
  throw new GradientStorageMovedError(rank, iteration);
}

/**
 * Elements per job of the finite check (2 MiB): one thread reads ~10 GB/s here, two or more
 * ~25 GB/s (48 MiB: 4.8 ms on one of libuv's threads, 1.6–1.9 ms split in 2–12), so a check
 * that outlasts backward, when the main thread only waits for it, ends sooner on every core.
 */
const FINITE_JOB_ELEMENTS = 1 << 19;

/**
 * Whether every value of rank `rank`'s share (of `size` equal parts) of each gradient reduced
 * in place is finite, checked on libuv's thread pool: at 1 rank (the whole) on the core backward
 * leaves free, while backward computes the next buckets; at N ranks each checks 1/N of the
 * averages, the same on every rank, and the ranks agree on one flag (DESIGN.md, "Where
 * gradients live"). In-place views exist only with the addon.
 */
export async function shareFiniteOffThread(views: Float32Array[], rank: number, size: number): Promise<boolean> {
  const shm = loadSharedMemory()!;
  const jobs: Promise<boolean>[] = [];
  for (const v of views) {
    const end = Math.floor((v.length * (rank + 1)) / size);
    for (let lo = Math.floor((v.length * rank) / size); lo < end; lo += FINITE_JOB_ELEMENTS)
      jobs.push(shm.allFiniteAsync(v.subarray(lo, Math.min(end, lo + FINITE_JOB_ELEMENTS))));
  }
  return (await Promise.all(jobs)).every(Boolean);
}

/** Whether every value is finite, at memory speed (the addon) or in JavaScript. */
export function allFinite(values: Float32Array): boolean {
  const shm = loadSharedMemory();
  return shm ? shm.allFinite(values) : values.every(Number.isFinite);
}
