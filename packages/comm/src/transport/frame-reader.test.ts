import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../errors.js';
import { channelOf, encodeHeader, type Frame, type FrameHeader, FrameKind, PAD, padOf } from './frame.js';
import { FrameReader } from './frame-reader.js';
import { Mailbox } from './mailbox.js';

const header = (payloadLength: number, seq: number): FrameHeader => ({
  payloadLength,
  kind: FrameKind.Data,
  op: 1,
  dtype: 1,
  reduceOp: 1,
  groupId: 0,
  seq,
  count: 0,
  root: 0,
  aux: 0,
});

function stream(payloads: Uint8Array[]): Uint8Array {
  const parts: Uint8Array[] = [];
  payloads.forEach((p, i) => {
    parts.push(encodeHeader(header(p.byteLength, i)), p, PAD.subarray(0, padOf(p.byteLength)));
  });
  return Buffer.concat(parts);
}

/** Feeds bytes in random-sized reads through nextBuffer/consume, like the socket does. */
function feed(reader: FrameReader, bytes: Uint8Array, rand: () => number): void {
  let off = 0;
  while (off < bytes.byteLength) {
    const buf = reader.nextBuffer();
    const n = Math.min(buf.byteLength, bytes.byteLength - off, 1 + Math.floor(rand() * 700));
    buf.set(bytes.subarray(off, off + n));
    reader.consume(n, buf);
    off += n;
  }
}

describe('FrameReader', () => {
  it('delivers frames split at any byte into posted sinks and into the queue, in order', () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let trial = 0; trial < 30; trial++) {
      const box = new Mailbox();
      const reader = new FrameReader(box, channelOf, (f) => box.deliver(channelOf(f.header), f), 'test');
      const payloads = Array.from({ length: 12 }, (_, i) =>
        Uint8Array.from({ length: Math.floor(rand() * 3000) }, (_, j) => (i * 31 + j) & 255),
      );
      const got: Uint8Array[] = payloads.map((p) => new Uint8Array(p.byteLength));
      const done: Promise<Frame>[] = [];
      // half the receives are posted before the bytes arrive (sinks), half after (queue)
      const sink = (i: number) => {
        let pos = 0;
        const dst = got[i] as Uint8Array;
        return {
          begin: (h: FrameHeader) => expect(h.payloadLength).toBe(dst.byteLength),
          write: (c: Uint8Array) => {
            dst.set(c, pos);
            pos += c.byteLength;
          },
          direct: trial % 2 ? (rem: number) => dst.subarray(pos, pos + rem) : undefined,
          wrote: (n: number) => {
            pos += n;
          },
        };
      };
      for (let i = 0; i < 6; i++) done.push(box.receive('0:c', 0, sink(i)).promise);
      feed(reader, stream(payloads), rand);
      for (let i = 6; i < 12; i++) done.push(box.receive('0:c', 0, sink(i)).promise);
      got.forEach((g, i) => {
        expect([...g]).toEqual([...(payloads[i] as Uint8Array)]);
      });
      expect(done).toHaveLength(12);
    }
  });

  it('rejects an oversized length before allocating, and unknown kinds', () => {
    const box = new Mailbox();
    const reader = new FrameReader(box, channelOf, () => {}, 'test');
    const bad = encodeHeader(header(0, 0));
    bad.writeUInt32LE(0xffffffff, 0);
    expect(() => reader.push(bad)).toThrow(ProtocolError);
    const reader2 = new FrameReader(box, channelOf, () => {}, 'test');
    const bad2 = encodeHeader(header(0, 0));
    bad2[4] = 99;
    expect(() => reader2.push(bad2)).toThrow(/unknown frame kind/);
  });
});
