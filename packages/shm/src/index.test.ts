import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSharedMemory } from './index.js';

const shm = loadSharedMemory();
const name = () => `/ddp-test-${randomBytes(6).toString('hex')}`;

describe.skipIf(!shm)('shared memory addon', () => {
  const mem = shm as NonNullable<typeof shm>;

  it('maps the same pages twice and unlinks the name', () => {
    const n = name();
    const a = new Int32Array(mem.map(n, 1 << 16));
    const b = new Int32Array(mem.map(n, 1 << 16));
    a[100] = 7;
    expect(b[100]).toBe(7);
    mem.unlink(n);
    expect(existsSync(`/dev/shm${n}`)).toBe(false);
    mem.unlink(n);
  });

  it('wait times out, returns at once on a changed word, and is woken from another process', async () => {
    const n = name();
    const sab = mem.map(n, 4096);
    const words = new Int32Array(sab);
    expect(await mem.wait(sab, 0, 0, 20)).toBe(true);
    expect(await mem.wait(sab, 0, 1, 1000)).toBe(false);
    expect(mem.waitSync(sab, 0, 0, 5)).toBe(true);
    expect(mem.waitSync(sab, 0, 1, 1000)).toBe(false);
    const addon = new URL('../build/Release/ddp_shm.node', import.meta.url).pathname;
    const child = spawn(process.execPath, [
      '-e',
      `const m = require(${JSON.stringify(addon)}); const a = new Int32Array(m.map(${JSON.stringify(n)}, ` +
        `4096)); setTimeout(() => { Atomics.store(a, 1, 5); m.wake(a.buffer, 4); }, 100);`,
    ]);
    const timedOut = await mem.wait(sab, 4, 0, 10_000);
    expect(timedOut).toBe(false);
    expect(Atomics.load(words, 1)).toBe(5);
    await new Promise((resolve) => child.on('exit', resolve));
    mem.unlink(n);
  });

  it('reduce gives bit-identical results to the JavaScript loops, NaN, infinities and int32 wrap-around included', () => {
    const js: Record<number, (a: number, b: number) => number> = {
      0: (a, b) => a + b,
      1: (a, b) => a * b,
      2: (a, b) => (a > b || Number.isNaN(a) ? a : b),
      3: (a, b) => (a < b || Number.isNaN(a) ? a : b),
    };
    const jsInt: Record<number, (a: number, b: number) => number> = {
      ...js,
      0: (a, b) => (a + b) | 0,
      1: (a, b) => Math.imul(a, b),
    };
    const special = [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -0,
      0,
      3.5e38,
      2 ** 31 - 1,
      -(2 ** 31),
    ];
    let seed = 1;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return (seed / 2 ** 31 - 0.5) * 2 ** ((seed % 40) - 10);
    };
    const ctors: (new (n: number) => Float32Array | Float64Array | Int32Array)[] = [
      Float32Array,
      Float64Array,
      Int32Array,
    ];
    for (const C of ctors) {
      const n = 1031;
      const make = (value: (i: number) => number) => {
        const a = new C(n);
        for (let i = 0; i < n; i++) a[i] = value(i);
        return a;
      };
      const src = make((i) => (i < special.length ? special[i] : rand()));
      const base = make((i) => (i < special.length ? special[(i + 3) % special.length] : rand()));
      for (const op of [0, 1, 2, 3] as const) {
        const got = base.slice();
        mem.reduce(got, src, op);
        const want = base.slice();
        const f = C === Int32Array ? jsInt[op] : js[op];
        for (let i = 0; i < n; i++) want[i] = (f as (a: number, b: number) => number)(want[i], src[i]);
        expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), `${C.name} op ${op}`).toBe(true);
        // out of place: the same bits in `out`, dst left as it was
        const out = new C(n);
        const dst = base.slice();
        mem.reduce(dst, src, op, out);
        expect(Buffer.from(out.buffer).equals(Buffer.from(want.buffer)), `${C.name} op ${op} into out`).toBe(true);
        expect(Buffer.from(dst.buffer).equals(Buffer.from(base.buffer))).toBe(true);
      }
    }
    expect(() => mem.reduce(new Float32Array(2), new Float32Array(3), 0)).toThrow(/lengths/);
    expect(() => mem.reduce(new Float32Array(2), new Float32Array(2), 0, new Float32Array(3))).toThrow(/lengths/);
    expect(() => mem.reduce(new Float32Array(2), new Float64Array(2) as unknown as Float32Array, 0)).toThrow(/reduce/);
  });

  it("divide gives JavaScript's quotients bit for bit and tells whether one is ±Infinity", () => {
    const special = [Number.NaN, Number.POSITIVE_INFINITY, -0, 1e-45, 1.2e-38, 3.3e38, -3.3e38, 1, 2 ** 24 + 1];
    for (const C of [Float32Array, Float64Array]) {
      const n = 1031;
      const base = new C(n);
      for (let i = 0; i < n; i++) base[i] = i < special.length ? special[i] : Math.sin(i * 7.1) * 2 ** ((i % 60) - 30);
      for (const divisor of [2, 3, 7, 0.5]) {
        const got = base.slice(1); // from index 1: no ±Infinity among the inputs
        const finite = mem.divide(got, divisor);
        const want = base.slice(1).map((v) => v / divisor);
        expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), `${C.name} / ${divisor}`).toBe(true);
        expect(finite, `${C.name} / ${divisor}`).toBe(!want.some((v) => Math.abs(v) === Number.POSITIVE_INFINITY));
      }
      expect(mem.divide(base.slice(0, 2), 3)).toBe(false);
    }
    expect(mem.divide(new Float32Array(0), 3)).toBe(true);
    expect(() => mem.divide(new Int32Array(2) as unknown as Float32Array, 2)).toThrow(/divide/);
  });

  it('copyStreaming copies every byte below and above its streaming size, at any alignment, overlapping too', () => {
    const src = new Uint8Array(randomBytes(600_011));
    // odd offsets and lengths: the aligned head, the 64-byte body and the tail each carry bytes
    for (const [off, len] of [
      [0, 100],
      [3, 262_143],
      [5, 262_144 + 61],
      [1, 600_000],
    ]) {
      const dst = new Uint8Array(new SharedArrayBuffer(len + 16));
      const view = dst.subarray(off + 7, off + 7 + len);
      mem.copyStreaming(view, src.subarray(off, off + len));
      expect(Buffer.compare(view, src.subarray(off, off + len)), `${off}+${len}`).toBe(0);
      expect(dst.subarray(0, off + 7).every((b) => b === 0)).toBe(true);
      expect(dst.subarray(off + 7 + len).every((b) => b === 0)).toBe(true);
    }
    // overlapping views of one buffer: as TypedArray.set (memmove), not a stream that reads what it wrote
    const both = new Uint8Array(randomBytes(400_000));
    const expected = both.slice(0, 300_000);
    mem.copyStreaming(both.subarray(100_000), both.subarray(0, 300_000));
    expect(Buffer.compare(both.subarray(100_000), expected)).toBe(0);
    expect(() => mem.copyStreaming(new Float32Array(4), new Float32Array(5))).toThrow(/byte length/);
  });

  it('refuses bad arguments with an error, not a crash', () => {
    const sab = new SharedArrayBuffer(8);
    expect(() => mem.wake(sab, 6)).toThrow(/aligned word/);
    expect(() => mem.wake(sab, 8)).toThrow(/aligned word/);
    expect(() => mem.map('/ddp-x', 10)).toThrow(/between/);
  });
});

// where the install step can build it, it must have been built (else the tests above silently skip)
it.runIf(process.platform === 'linux' && existsSync('/usr/bin/g++'))('is built on Linux with a compiler', () => {
  expect(shm).not.toBeNull();
});
