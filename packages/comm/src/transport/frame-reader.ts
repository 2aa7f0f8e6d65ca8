import { type CommError, ProtocolError } from '../errors.js';
import {
  decodeHeader,
  type Frame,
  type FrameHeader,
  FrameKind,
  HEADER_BYTES,
  MAX_FRAME_PAYLOAD,
  MAX_KIND,
  padOf,
} from './frame.js';
import type { Claimed, Mailbox } from './mailbox.js';

const EMPTY = new Uint8Array(0);
const READ_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * Parses the byte stream from one peer as it is read (socket `onread`): headers are
 * validated before anything is allocated, payloads go straight to a posted receive's sink
 * (or, with no receive posted yet, into a buffer of exactly the announced length).
 * Frames are padded to 8 bytes and the read buffer is offset to the stream position
 * modulo 8, so payload views are aligned for typed arrays.
 */
export class FrameReader {
  private readonly big = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES + 8);
  private readonly hdr = Buffer.allocUnsafe(HEADER_BYTES);
  private hdrFill = 0;
  private header: FrameHeader | null = null;
  private remaining = 0; // payload bytes still to come
  private padding = 0; // pad bytes still to skip
  private claimed: Claimed | null = null;
  private refused: CommError | null = null;
  private buffered: Uint8Array | null = null;
  private bufferedFill = 0;
  private stream = 0; // bytes consumed so far (mod 8 is what matters)
  private directTarget: Uint8Array | null = null;

  constructor(
    private readonly mailbox: Mailbox,
    private readonly channelOf: (h: FrameHeader) => string,
    private readonly onFrame: (f: Frame) => void,
    private readonly what: string,
  ) {}

  /** The connection died: a receive that was taking a frame's payload fails now. */
  abort(err: CommError): void {
    const claimed = this.claimed;
    this.claimed = null;
    this.header = null;
    claimed?.reject(err);
  }

  /** Memory for the next socket read: a posted receive's destination when possible. */
  nextBuffer(): Uint8Array {
    this.directTarget = null;
    if (this.header && this.remaining > 0 && this.claimed?.sink.direct && !this.refused) {
      const target = this.claimed.sink.direct(this.remaining);
      if (target && target.byteLength > 0) {
        this.directTarget = target;
        return target;
      }
    }
    return this.big.subarray(this.stream & 7, (this.stream & 7) + READ_BUFFER_BYTES);
  }

  /** Consumes `n` bytes just read into `buf` (the memory nextBuffer returned). */
  consume(n: number, buf: Uint8Array): void {
    if (this.directTarget && buf === this.directTarget) {
      this.claimed?.sink.wrote?.(n);
      this.stream += n;
      this.remaining -= n;
      if (this.remaining === 0) this.finishPayload();
      return;
    }
    this.push(buf.subarray(0, n));
  }

  /** Consumes a chunk of the stream (may be reused by the caller after return). */
  push(chunk: Uint8Array): void {
    let off = 0;
    while (off < chunk.byteLength) {
      if (this.padding > 0) {
        const k = Math.min(this.padding, chunk.byteLength - off);
        this.padding -= k;
        off += k;
        this.stream += k;
        continue;
      }
      if (!this.header) {
        const k = Math.min(HEADER_BYTES - this.hdrFill, chunk.byteLength - off);
        this.hdr.set(chunk.subarray(off, off + k), this.hdrFill);
        this.hdrFill += k;
        off += k;
        this.stream += k;
        if (this.hdrFill === HEADER_BYTES) this.startFrame();
        continue;
      }
      const k = Math.min(this.remaining, chunk.byteLength - off);
      this.payload(chunk.subarray(off, off + k));
      off += k;
      this.stream += k;
      this.remaining -= k;
      if (this.remaining === 0) this.finishPayload();
    }
  }

  private startFrame(): void {
    this.hdrFill = 0;
    const h = decodeHeader(this.hdr);
    if (h.kind < FrameKind.Data || h.kind > MAX_KIND)
      throw new ProtocolError(`${this.what}: unknown frame kind ${h.kind}`, { op: 'transport' });
    if (h.payloadLength > MAX_FRAME_PAYLOAD) {
      throw new ProtocolError(`${this.what}: frame payload of ${h.payloadLength} bytes exceeds ${MAX_FRAME_PAYLOAD}`, {
        op: 'transport',
      });
    }
    if (!Number.isSafeInteger(h.count) || h.count < 0)
      throw new ProtocolError(`${this.what}: bad element count ${h.count}`, { op: 'transport' });
    this.header = h;
    this.remaining = h.payloadLength;
    this.claimed = null;
    this.refused = null;
    this.buffered = null;
    if (h.kind === FrameKind.Data || h.kind === FrameKind.P2P) {
      this.claimed = this.mailbox.claim(this.channelOf(h));
      if (this.claimed) {
        try {
          this.claimed.sink.begin(h);
        } catch (e) {
          this.refused = e as CommError;
        }
      }
    }
    if (!this.claimed && h.payloadLength > 0) {
      this.buffered = Buffer.allocUnsafeSlow(h.payloadLength);
      this.bufferedFill = 0;
    }
    if (this.remaining === 0) this.finishPayload();
  }

  private payload(piece: Uint8Array): void {
    if (this.buffered) {
      this.buffered.set(piece, this.bufferedFill);
      this.bufferedFill += piece.byteLength;
    } else if (this.claimed && !this.refused) {
      try {
        this.claimed.sink.write(piece);
      } catch (e) {
        this.refused = e as CommError;
      }
    }
  }

  private finishPayload(): void {
    const h = this.header as FrameHeader;
    this.header = null;
    this.padding = padOf(h.payloadLength);
    const claimed = this.claimed;
    this.claimed = null;
    if (claimed) {
      if (this.refused) claimed.reject(this.refused);
      else claimed.resolve({ header: h, payload: EMPTY });
      return;
    }
    const payload = this.buffered ?? EMPTY;
    this.buffered = null;
    this.onFrame({ header: h, payload });
  }
}
