import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadSharedMemory } from './index.js';

const shm = loadSharedMemory();

/**
 * Three "ranks" of one segment driven from this thread: each call that finds a peer missing
 * returns late at once (no spin budget), so the test interleaves them. Layout as @ddp/comm's
 * transport/shm-exchange.ts fills it (words; slots in bytes).
 */
const N = 3;
const BELLS = 16;
const PROGRESS = BELLS + 16 * N;
const TABLE = PROGRESS + 16 * N;
const SLOTS = (TABLE + N * 256 * 8) * 4;
const SLOT_BYTES = 4096;
const [GEN, SEQ, FP, DTYPE, OP, SPIN, PHASE, PEER] = [7, 8, 9, 14, 15, 16, 17, 18];

describe.skipIf(!shm)('exchange: a small all-reduce in one native call', () => {
  const mem = shm as NonNullable<typeof shm>;
  const segment = `/ddp-test-${randomBytes(6).toString('hex')}`;
  const sab = mem.map(segment, SLOTS + 2 * N * SLOT_BYTES);
  mem.unlink(segment); // mapped, the name is not needed: each run left one in /dev/shm
  const words = new Int32Array(sab);
  const params = Array.from({ length: N }, (_, r) => Int32Array.from([N, r, BELLS, PROGRESS, TABLE, 0, SLOT_BYTES]));
  let gen = 0;

  /** Rank r records collective `seq` (as comm's ShmLane.record) and fills its params. */
  function start(r: number, seq: number, count: number, dtype: number, op: number): Int32Array {
    const p = new Int32Array(19);
    p.set(params[r] as Int32Array);
    p[5] = SLOTS + (seq % 2) * N * SLOT_BYTES;
    p[GEN] = gen;
    p[SEQ] = seq;
    p.set([11, 1, op + 1, count, 0], FP);
    p[DTYPE] = dtype;
    p[OP] = op;
    p[SPIN] = 0;
    p[PHASE] = 0;
    const e = TABLE + (r * 256 + (seq % 256)) * 8;
    words.set([11, 1, op + 1, count, 0], e + 1);
    Atomics.store(words, e, seq);
    return p;
  }

  it('every rank gets chunk c reduced from rank c first, the same bits; late, then done, when called again', () => {
    gen++;
    const inputs = [0, 1, 2].map((r) => Float32Array.from({ length: 6 }, (_, i) => [1e8, 3, -1e8][(r + i) % 3]));
    const data = inputs.map((a) => a.slice());
    const ps = [0, 1, 2].map((r) => start(r, 1, 6, 0, 0));
    expect(mem.exchange(sab, ps[0] as Int32Array, data[0] as Float32Array)).toBe(1);
    expect((ps[0] as Int32Array)[PEER]).toBe(1);
    expect(mem.exchange(sab, ps[1] as Int32Array, data[1] as Float32Array)).toBe(1);
    expect(mem.exchange(sab, ps[2] as Int32Array, data[2] as Float32Array)).toBe(0);
    expect(mem.exchange(sab, ps[0] as Int32Array, data[0] as Float32Array)).toBe(0);
    expect(mem.exchange(sab, ps[1] as Int32Array, data[1] as Float32Array)).toBe(0);
    // chunks of 2: chunk c is ((x_c + x_a) + x_b) with a < b the other ranks
    const f = Math.fround;
    const want = Float32Array.from({ length: 6 }, (_, i) => {
      const c = Math.floor(i / 2);
      const x = inputs.map((a) => a[i]);
      const [a, b] = [0, 1, 2].filter((r) => r !== c) as [number, number];
      return f(f(x[c] + x[a]) + x[b]);
    });
    for (const d of data) expect(Array.from(d)).toEqual(Array.from(want));
    expect(new Set(want).size).toBeGreaterThan(1);
  });

  it('a peer that published another collective at the same sequence number is a mismatch, named', () => {
    gen++;
    const p0 = start(0, 2, 8, 0, 0);
    start(1, 2, 9, 0, 0);
    start(2, 2, 8, 0, 0);
    expect(mem.exchange(sab, p0, new Float32Array(8))).toBe(2);
    expect(p0[PEER]).toBe(1);
  });

  it('refuses params that do not fit the segment and data of another type or size', () => {
    gen++;
    const p = start(0, 3, 4, 0, 0);
    expect(() => mem.exchange(sab, p, new Float64Array(4))).toThrow(/type or size/);
    expect(() => mem.exchange(sab, p, new Float32Array(SLOT_BYTES / 4 + 1))).toThrow(/type or size/);
    p[5] = sab.byteLength;
    expect(() => mem.exchange(sab, p, new Float32Array(4))).toThrow(/do not fit/);
  });
});
