/**
 * Reusable host buffers of shared memory for collectives on copies of tensors: ZeRO stage 2's
 * per-parameter gradient reduces, and FSDP's all-gathers and reduce-scatters that cannot run on
 * the wasm heap (16-bit communication, no @ddp/shm, another backend). A buffer is needed only
 * while its collective runs (the result is uploaded into a tensor at once), so buffers go back to
 * a pool and the next collective of the same size takes them: no allocation (and none of the page
 * faults and garbage collection a fresh 16 MB array per collective costs). Shared memory, so comm
 * works on them in place, without staging them through its own.
 */
import { sharedArray } from '@ddp/comm';

export class BufferPool {
  private readonly idle = new Map<number, Float32Array[]>();
  /** How many buffers were taken so far: the host-copy path's uses (tests check the heap path takes none). */
  taken = 0;

  /**
   * `keptPerSize`: idle buffers kept per length. FSDP keeps 2, so the host memory stays at the few
   * buffers in flight rather than one per unit (which would hold the whole model again); ZeRO stage
   * 2 keeps what was in flight at once (its reduces overlap backward: a backward's gradients, at most).
   */
  constructor(private readonly keptPerSize: number) {}

  /** A buffer of `length` floats; its contents are whatever the last user left: overwrite it. */
  take(length: number): Float32Array {
    this.taken++;
    return this.idle.get(length)?.pop() ?? sharedArray(Float32Array, length);
  }

  /** Returns a buffer taken with `take`; the caller must not use it afterwards. */
  give(buffer: Float32Array): void {
    const list = this.idle.get(buffer.length) ?? [];
    if (list.length < this.keptPerSize) list.push(buffer);
    this.idle.set(buffer.length, list);
  }
}
