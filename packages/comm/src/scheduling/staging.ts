import { bytesPerElement, type CommArray, checkMovable, type Dtype, viewAs } from '../dtypes.js';
import { InvalidArgumentError } from '../errors.js';
import type { OpResult } from './protocol.js';

/**
 * SharedArrayBuffers that carry an op's data between the main thread and the comm worker.
 * Reused across ops (allocating and zeroing 64 MiB per op would cost more than the copy).
 */
export class StagingPool {
  private free: SharedArrayBuffer[] = [];
  private freeBytes = 0;

  constructor(private readonly maxFreeBytes = 512 * 1024 * 1024) {}

  acquire(bytes: number): SharedArrayBuffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const len = (this.free[i] as SharedArrayBuffer).byteLength;
      if (
        len >= bytes &&
        len <= 2 * bytes + 4096 &&
        (best < 0 || len < (this.free[best] as SharedArrayBuffer).byteLength)
      )
        best = i;
    }
    if (best >= 0) {
      const [sab] = this.free.splice(best, 1) as [SharedArrayBuffer];
      this.freeBytes -= sab.byteLength;
      return sab;
    }
    return new SharedArrayBuffer(Math.max(8, bytes));
  }

  release(sab: SharedArrayBuffer | null): void {
    if (!sab) return;
    this.free.push(sab);
    this.freeBytes += sab.byteLength;
    while (this.freeBytes > this.maxFreeBytes && this.free.length > 0) {
      const old = this.free.shift() as SharedArrayBuffer;
      this.freeBytes -= old.byteLength;
    }
  }
}

/**
 * The bytes of an array (a view). An array whose buffer was detached while an op held it (a
 * WebAssembly.Memory grew under a heap view, or the buffer was transferred) raised V8's
 * untyped "Cannot perform Construct on a detached ArrayBuffer", naming neither the op nor the cause.
 */
export function bytes(a: CommArray): Uint8Array {
  checkMovable(a, 'a collective');
  try {
    return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  } catch (e) {
    throw new InvalidArgumentError(
      'an array an op reads or writes was detached while the op held it (a WebAssembly.Memory grew under ' +
        'a view of it, or its buffer was transferred): its result could not be written; pass sharedArray() ' +
        `memory or a copy: ${String(e)}`,
    );
  }
}

/** Copies arrays one after another into a staging buffer. */
export function concatInto(sab: SharedArrayBuffer, offset: number, arrays: CommArray[]): void {
  let off = offset;
  for (const a of arrays) {
    new Uint8Array(sab, off, a.byteLength).set(bytes(a));
    off += a.byteLength;
  }
}

/** Copies per-rank arrays out of a worker-allocated result buffer. */
export function splitResult(d: Dtype, result: OpResult): CommArray[] {
  const sab = result.sab as SharedArrayBuffer;
  const out: CommArray[] = [];
  let off = 0;
  for (const n of result.sizes ?? []) {
    out.push(viewAs(d, sab, off, n).slice());
    off += n * bytesPerElement(d);
  }
  return out;
}

type ArrayCtor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => CommArray;

/**
 * The staging a late one-step exchange of a plain array finishes into (op-dispatcher.ts's fast
 * path), made only if a peer is late: `arm` names the array and hands out the one function that
 * makes it, bound once, so a call whose peers are prompt allocates nothing.
 */
export class LateStaging {
  private buf: CommArray | null = null;
  private staged: { sab: SharedArrayBuffer; view: CommArray } | null = null;
  private readonly stage = (): CommArray => {
    const buf = this.buf as CommArray;
    const sab = this.pool.acquire(buf.byteLength);
    this.staged = { sab, view: new (buf.constructor as ArrayCtor)(sab, 0, buf.length) };
    return this.staged.view;
  };

  constructor(private readonly pool: StagingPool) {}

  arm(buf: CommArray): () => CommArray {
    this.buf = buf;
    return this.stage;
  }

  /** The staging made since `arm`, if any; disarms. */
  take(): { sab: SharedArrayBuffer; view: CommArray } | null {
    const staged = this.staged;
    this.buf = null;
    this.staged = null;
    return staged;
  }
}
