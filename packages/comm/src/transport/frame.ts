/**
 * Peer frame: a fixed 32-byte little-endian header, then `payloadLength` bytes (padded to 8).
 * The header carries the collective's fingerprint (op, dtype, reduce op, count, sequence
 * number, root) so every receiver can check that all ranks run the same collective.
 *
 *   0 u32 payloadLength   4 u8 kind   5 u8 op   6 u8 dtype   7 u8 reduceOp
 *   8 u32 groupId   12 u32 seq   16 f64 count   24 i32 root (or tag)   28 u32 aux
 */
export const HEADER_BYTES = 32;
/** No frame payload may exceed this: senders split larger messages into segments. */
export const MAX_FRAME_PAYLOAD = 16 * 1024 * 1024;

export enum FrameKind {
  Data = 1,
  P2P = 2,
  Abort = 3,
  Bye = 4,
  Probe = 5,
  ProbeReply = 6,
  /** Liveness only (see heartbeat.ts). */
  Heartbeat = 7,
}
export const MAX_KIND = 7;

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

/** Zero bytes after a payload so the next frame starts 8-byte aligned in the stream. */
export function padOf(payloadLength: number): number {
  return (8 - (payloadLength & 7)) & 7;
}

export const PAD = new Uint8Array(8);

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

export function decodeHeader(b: Buffer): FrameHeader {
  return {
    payloadLength: b.readUInt32LE(0),
    kind: b[4] as FrameKind,
    op: b[5],
    dtype: b[6],
    reduceOp: b[7],
    groupId: b.readUInt32LE(8),
    seq: b.readUInt32LE(12),
    count: b.readDoubleLE(16),
    root: b.readInt32LE(24),
    aux: b.readUInt32LE(28),
  };
}

/** Channel name of a frame inside a peer's mailbox. */
export function channelOf(h: FrameHeader): string {
  return h.kind === FrameKind.P2P ? `${h.groupId}:p:${h.root}` : `${h.groupId}:c`;
}

/** A frame with no payload and nothing but its kind (heartbeat, goodbye). */
export function controlHeader(kind: FrameKind): FrameHeader {
  return { payloadLength: 0, kind, op: 0, dtype: 0, reduceOp: 0, groupId: 0, seq: 0, count: 0, root: 0, aux: 0 };
}
