import { ProtocolError } from '../errors.js';
import type { ByteQueue } from '../transport/byte-queue.js';

/** TCPStore wire format: every message is `u32 bodyLength | body`, little-endian. */
export const MAX_STORE_BODY = 64 * 1024 * 1024 + 4096;
export const MAX_KEY_BYTES = 4096;
export const MAX_KEYS = 65536;

export enum StoreCmd {
  Set = 1,
  Get = 2,
  Add = 3,
  CompareSet = 4,
  Wait = 5,
  Delete = 6,
  NumKeys = 7,
  Check = 8,
}

/** Builds a message body from fields. */
export class BodyWriter {
  private parts: Buffer[] = [];
  u8(v: number): this {
    this.parts.push(Buffer.from([v]));
    return this;
  }
  u32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.parts.push(b);
    return this;
  }
  f64(v: number): this {
    const b = Buffer.alloc(8);
    b.writeDoubleLE(v);
    this.parts.push(b);
    return this;
  }
  bytes(v: Uint8Array): this {
    this.u32(v.length);
    this.parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    return this;
  }
  str(v: string): this {
    return this.bytes(Buffer.from(v, 'utf8'));
  }
  /** The framed message: length prefix then body. */
  frame(): Buffer {
    const body = Buffer.concat(this.parts);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(body.length);
    return Buffer.concat([len, body]);
  }
}

/** Reads fields from a body, raising ProtocolError on any out-of-bounds length. */
export class BodyReader {
  private off = 0;
  constructor(private readonly b: Buffer) {}
  private need(n: number): void {
    if (n < 0 || this.off + n > this.b.length)
      throw new ProtocolError(`store message truncated (need ${n} bytes at ${this.off} of ${this.b.length})`, {
        op: 'store',
      });
  }
  u8(): number {
    this.need(1);
    return this.b[this.off++];
  }
  u32(): number {
    this.need(4);
    const v = this.b.readUInt32LE(this.off);
    this.off += 4;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.b.readDoubleLE(this.off);
    this.off += 8;
    return v;
  }
  bytes(max = MAX_STORE_BODY): Uint8Array {
    const n = this.u32();
    if (n > max) throw new ProtocolError(`store field of ${n} bytes exceeds ${max}`, { op: 'store' });
    this.need(n);
    const v = new Uint8Array(this.b.subarray(this.off, this.off + n));
    this.off += n;
    return v.slice();
  }
  key(): string {
    return Buffer.from(this.bytes(MAX_KEY_BYTES)).toString('utf8');
  }
  keys(): string[] {
    const n = this.u32();
    if (n > MAX_KEYS) throw new ProtocolError(`store request lists ${n} keys (max ${MAX_KEYS})`, { op: 'store' });
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(this.key());
    return out;
  }
  end(): void {
    if (this.off !== this.b.length)
      throw new ProtocolError(`store message has ${this.b.length - this.off} trailing bytes`, { op: 'store' });
  }
}

/** Takes every complete message off the queue; throws ProtocolError on an oversized length. */
export function takeBodies(q: ByteQueue): Buffer[] {
  const out: Buffer[] = [];
  const hdr = Buffer.alloc(4);
  while (q.length >= 4) {
    q.peekInto(hdr, 4);
    const len = hdr.readUInt32LE(0);
    if (len > MAX_STORE_BODY)
      throw new ProtocolError(`store message of ${len} bytes exceeds ${MAX_STORE_BODY}`, { op: 'store' });
    if (q.length < 4 + len) break;
    q.skip(4);
    out.push(Buffer.from(q.take(len).buffer));
  }
  return out;
}
