import { reduceInto } from '../algorithms/reduce.js';
import type { NumArray, ReduceOp } from '../dtypes.js';
import type { FrameHeader } from '../transport/frame.js';
import type { Sink } from '../transport/mailbox.js';
import type { OpContext } from './op-context.js';

/** Checks a frame against the receiving op: same fingerprint, exactly the expected length. */
function expect(ctx: OpContext, from: number, h: FrameHeader, bytes: number): void {
  ctx.check(h, from);
  if (h.payloadLength !== bytes) ctx.lengthMismatch(from, bytes, h.payloadLength);
}

/** Copies a payload into place; lets the socket read straight into the destination. */
export class CopySink implements Sink {
  private pos = 0;
  constructor(
    private readonly ctx: OpContext,
    private readonly from: number,
    private readonly dst: Uint8Array,
    /** Sees the header before any of the payload lands in dst. */
    private readonly onHeader?: (h: FrameHeader) => void,
  ) {}
  begin(h: FrameHeader): void {
    expect(this.ctx, this.from, h, this.dst.byteLength);
    this.onHeader?.(h);
  }
  write(chunk: Uint8Array): void {
    this.dst.set(chunk, this.pos);
    this.pos += chunk.byteLength;
  }
  direct(remaining: number): Uint8Array {
    return this.dst.subarray(this.pos, this.pos + remaining);
  }
  wrote(n: number): void {
    this.pos += n;
  }
}

/**
 * Reduces a payload into place as it streams in. Pieces normally start on an element
 * boundary (frames are 8-byte aligned); an element split between two socket reads is
 * carried over in a small buffer.
 */
export class ReduceSink implements Sink {
  private elem = 0;
  private readonly carry = new Uint8Array(8);
  private carryLen = 0;
  private readonly Ctor: new (
    b: ArrayBufferLike,
    o: number,
    n: number,
  ) => NumArray;
  constructor(
    private readonly ctx: OpContext,
    private readonly from: number,
    private readonly dst: NumArray,
    private readonly op: ReduceOp,
  ) {
    this.Ctor = dst.constructor as new (b: ArrayBufferLike, o: number, n: number) => NumArray;
  }
  begin(h: FrameHeader): void {
    expect(this.ctx, this.from, h, this.dst.byteLength);
  }
  private apply(src: NumArray): void {
    reduceInto(this.dst.subarray(this.elem, this.elem + src.length), src, this.op);
    this.elem += src.length;
  }
  write(chunk: Uint8Array): void {
    const bpe = this.dst.BYTES_PER_ELEMENT;
    let off = 0;
    if (this.carryLen > 0) {
      const take = Math.min(bpe - this.carryLen, chunk.byteLength);
      this.carry.set(chunk.subarray(0, take), this.carryLen);
      this.carryLen += take;
      off = take;
      if (this.carryLen < bpe) return;
      this.apply(new this.Ctor(this.carry.buffer, 0, 1));
      this.carryLen = 0;
    }
    const whole = Math.floor((chunk.byteLength - off) / bpe);
    if (whole > 0) {
      const start = chunk.byteOffset + off;
      if (start % bpe === 0) {
        this.apply(new this.Ctor(chunk.buffer, start, whole));
      } else {
        const aligned = new Uint8Array(whole * bpe);
        aligned.set(chunk.subarray(off, off + whole * bpe));
        this.apply(new this.Ctor(aligned.buffer, 0, whole));
      }
    }
    const rest = chunk.byteLength - off - whole * bpe;
    if (rest > 0) {
      this.carry.set(chunk.subarray(chunk.byteLength - rest));
      this.carryLen = rest;
    }
  }
}
