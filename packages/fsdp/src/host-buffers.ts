/**
 * Reusable host buffers for the all-gathers and reduce-scatters that cannot run on the wasm heap
 * (16-bit communication, no @ddp/shm, another backend). A unit's full buffer is needed
 * only while its collective runs (the gathered values are uploaded into tensors at once), so
 * buffers go back to a pool and the next unit of the same size takes them: no allocation (and
 * none of the garbage collection a fresh 16 MB array per collective costs), while the host
 * memory stays at the few buffers in flight rather than one per unit (which would hold the
 * whole model again). At most `KEPT_PER_SIZE` idle buffers are kept per length.
 */
const KEPT_PER_SIZE = 2;
const idle = new Map<number, Float32Array[]>();

let taken = 0;

/** A buffer of `length` floats; its contents are whatever the last user left: overwrite it. */
export function takeBuffer(length: number): Float32Array {
  taken++;
  return idle.get(length)?.pop() ?? new Float32Array(length);
}

/** How many buffers were taken so far: the host-copy path's uses (tests check the heap path takes none). */
export const buffersTaken = (): number => taken;

/** Returns a buffer taken with `takeBuffer`; the caller must not use it afterwards. */
export function giveBuffer(buffer: Float32Array): void {
  const list = idle.get(buffer.length) ?? [];
  if (list.length < KEPT_PER_SIZE) list.push(buffer);
  idle.set(buffer.length, list);
}
