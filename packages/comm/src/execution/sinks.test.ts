import { describe, expect, it } from 'vitest';
import { type FrameHeader, FrameKind } from '../transport/frame.js';
import type { OpContext } from './op-context.js';
import { ReduceSink } from './sinks.js';

const ctx = {
  check: () => {},
  lengthMismatch: () => {
    throw new Error('length');
  },
} as unknown as OpContext;
const h = (n: number): FrameHeader => ({
  payloadLength: n,
  kind: FrameKind.Data,
  op: 1,
  dtype: 1,
  reduceOp: 1,
  groupId: 0,
  seq: 1,
  count: 0,
  root: 0,
  aux: 0,
});

describe('ReduceSink', () => {
  it('reduces a payload split at arbitrary (also mid-element, misaligned) offsets', () => {
    for (const Ctor of [Float32Array, Float64Array, Int32Array] as const) {
      for (let trial = 0; trial < 50; trial++) {
        const n = 1 + ((trial * 37) % 300);
        const dst = new Ctor(n).map((_, i) => i);
        const src = new Ctor(n).map((_, i) => 1000 + i);
        const bytes = new Uint8Array(src.buffer);
        const sink = new ReduceSink(ctx, 0, dst, 'sum');
        sink.begin(h(bytes.byteLength));
        let off = 0;
        let k = trial;
        while (off < bytes.byteLength) {
          k = (k * 7 + 3) % 23;
          const len = Math.min(bytes.byteLength - off, 1 + k);
          // copy to a misaligned place, as a socket read buffer could be
          const holder = new Uint8Array(len + 3);
          holder.set(bytes.subarray(off, off + len), 3);
          sink.write(holder.subarray(3));
          off += len;
        }
        expect([...dst]).toEqual([...new Ctor(n).map((_, i) => 1000 + 2 * i)]);
      }
    }
  });
});
