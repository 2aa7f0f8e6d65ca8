import type { NumArray } from '../dtypes.js';

/** Bytes of a typed array (a view, no copy). */
export function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** A typed view like `like` over received bytes (frames are 8-byte aligned fresh buffers). */
export function numView(like: NumArray, bytes: Uint8Array): NumArray {
  const Ctor = like.constructor as new (b: ArrayBufferLike, o: number, n: number) => NumArray;
  return new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / like.BYTES_PER_ELEMENT);
}
