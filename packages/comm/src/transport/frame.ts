import { ProtocolError } from '../errors.js';
import type { ByteQueue } from './byte-queue.js';

/**
 * Peer frame: a fixed 32-byte little-endian header, then `payloadLength` bytes.
 * The header carries the collective's fingerprint (op, dtype, reduce op, count, sequence
 * number, root) so every receiver can check that all ranks run the same collective.
 *
 *   0 u32 payloadLength   4 u8 kind   5 u8 op   6 u8 dtype   7 u8 reduceOp
 *   8 u32 groupId   12 u32 seq   16 f64 count   24 i32 root (or tag)   28 u32 aux
 */
export const HEADER_BYTES = 32;
/** No frame payload may exceed this: senders split larger messages into segments. */
export const MAX_FRAME_PAYLOAD = 16 * 1024 * 1024;

export const enum FrameKind {
  Data = 1,
  P2P = 2,
  Abort = 3,
  Bye = 4,
  Probe = 5,
  ProbeReply = 6,
}
const MAX_KIND = 6;

/** What every rank must agree on for one collective. */
export interface Fingerprint {
  op: number;
  dtype: number;
  reduceOp: number;
  count: number;
  seq: number;
  root: number;
}

export interface FrameHeader extends Fingerprint {
  payloadLength: number;
  kind: FrameKind;
  groupId: number;
  aux: number;
}

export interface Frame {
  header: FrameHeader;
  payload: Uint8Array;
}

export function encodeHeader(h: FrameHeader): Buffer {
  const b = Buffer.allocUnsafe(HEADER_BYTES);
  b.writeUInt32LE(h.payloadLength, 0);
  b[4] = h.kind;
  b[5] = h.op;
  b[6] = h.dtype;
  b[7] = h.reduceOp;
  b.writeUInt32LE(h.groupId >>> 0, 8);
  b.writeUInt32LE(h.seq >>> 0, 12);
  b.writeDoubleLE(h.count, 16);
  b.writeInt32LE(h.root | 0, 24);
  b.writeUInt32LE(h.aux >>> 0, 28);
  return b;
}

function decodeHeader(b: Buffer): FrameHeader {
  return {
    payloadLength: b.readUInt32LE(0),
    kind: b[4] as FrameKind,
    op: b[5] as number,
    dtype: b[6] as number,
    reduceOp: b[7] as number,
    groupId: b.readUInt32LE(8),
    seq: b.readUInt32LE(12),
    count: b.readDoubleLE(16),
    root: b.readInt32LE(24),
    aux: b.readUInt32LE(28),
  };
}

/**
 * Takes every complete frame off the queue. A header that cannot be valid (unknown kind,
 * payload over the bound, non-integer count) throws ProtocolError before anything is allocated.
 */
export function takeFrames(q: ByteQueue, what: string): Frame[] {
  const out: Frame[] = [];
  const hb = Buffer.allocUnsafe(HEADER_BYTES);
  while (q.length >= HEADER_BYTES) {
    q.peekInto(hb, HEADER_BYTES);
    const h = decodeHeader(hb);
    if (h.kind < 1 || h.kind > MAX_KIND) throw new ProtocolError(`${what}: unknown frame kind ${h.kind}`, { op: 'transport' });
    if (h.payloadLength > MAX_FRAME_PAYLOAD) {
      throw new ProtocolError(`${what}: frame payload of ${h.payloadLength} bytes exceeds ${MAX_FRAME_PAYLOAD}`, { op: 'transport' });
    }
    if (!Number.isSafeInteger(h.count) || h.count < 0) throw new ProtocolError(`${what}: bad element count ${h.count}`, { op: 'transport' });
    if (q.length < HEADER_BYTES + h.payloadLength) break;
    q.skip(HEADER_BYTES);
    out.push({ header: h, payload: q.take(h.payloadLength) });
  }
  return out;
}
