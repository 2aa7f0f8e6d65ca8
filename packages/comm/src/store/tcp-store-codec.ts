import { InvalidArgumentError, ProtocolError } from '../errors.js';
import type { ByteQueue } from '../transport/byte-queue.js';
import { checkKey } from './store.js';

/**
 * TCPStore wire format: every message is `u32 bodyLength | body`, little-endian. The limits
 * bound what a garbled length prefix makes the server buffer. 64 MiB per value (torch has no
 * limit) is kept: the store carries rendezvous metadata, bulk data goes through collectives,
 * and the client refuses a larger value or key before sending, so the connection survives.
 */
export const MAX_VALUE_BYTES = 64 * 1024 * 1024;
export const MAX_KEY_BYTES = 4096;
export const MAX_KEYS = 65536;
/** compareSet carries two values and a key (plus its id, command and lengths). */
export const MAX_STORE_BODY = 2 * MAX_VALUE_BYTES + MAX_KEY_BYTES + 64;

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

/** A reply's status byte. */
export enum StoreReply {
  Ok = 0,
  /** The request was well-formed but refused (add to a key that holds no integer): InvalidArgumentError. */
  Refused = 1,
  /** The request did not parse (a field over the limits, an unknown command): ProtocolError. */
  Malformed = 2,
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
  /** A key, refused (InvalidArgumentError, before anything is sent) over MAX_KEY_BYTES of UTF-8 or not well-formed. */
  key(k: string): this {
    const b = Buffer.from(checkKey(k), 'utf8');
    if (b.length > MAX_KEY_BYTES)
      throw new InvalidArgumentError(`store key of ${b.length} bytes exceeds the TCPStore's ${MAX_KEY_BYTES}`, {
        op: 'store',
      });
    return this.bytes(b);
  }
  /** A value, refused (InvalidArgumentError, before anything is sent) over MAX_VALUE_BYTES. */
  value(v: Uint8Array): this {
    if (v.length > MAX_VALUE_BYTES)
      throw new InvalidArgumentError(
        `store value of ${v.length} bytes exceeds the TCPStore's ${MAX_VALUE_BYTES} (64 MiB)`,
        { op: 'store' },
      );
    return this.bytes(v);
  }
  /** The framed message: length prefix then body. */
  frame(): Buffer {
    const body = Buffer.concat(this.parts);
    if (body.length > MAX_STORE_BODY)
      throw new InvalidArgumentError(`store message of ${body.length} bytes exceeds ${MAX_STORE_BODY}`, {
        op: 'store',
      });
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
  bytes(max = MAX_VALUE_BYTES): Uint8Array {
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
