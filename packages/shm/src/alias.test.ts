import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { loadSharedMemory } from './index.js';

const shm = loadSharedMemory();
/** A wasm memory (this package's TypeScript lib has no WebAssembly types). */
type WasmMemory = { readonly buffer: ArrayBuffer; grow(pages: number): number };
const { Memory } = (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number }) => WasmMemory } })
  .WebAssembly;

describe.skipIf(!shm)('shared aliases of unshared memory', () => {
  const mem = shm as NonNullable<typeof shm>;

  it('aliases a wasm memory both ways, and still does after the memory grew in place', () => {
    const wasm = new Memory({ initial: 16 });
    const base = mem.address(wasm.buffer);
    const alias = mem.aliasShared(wasm.buffer);
    expect(alias.byteLength).toBe(wasm.buffer.byteLength);
    expect(mem.address(alias)).toBe(base);
    new Float32Array(wasm.buffer)[10] = 1.5;
    expect(new Float32Array(alias)[10]).toBe(1.5);
    const before = wasm.buffer;
    wasm.grow(2000); // 125 MiB more: detaches the old ArrayBuffer
    expect(before.byteLength).toBe(0);
    expect(mem.address(wasm.buffer)).toBe(base);
    new Float32Array(alias)[11] = 2.5;
    expect(new Float32Array(wasm.buffer).subarray(10, 12)).toEqual(Float32Array.of(1.5, 2.5));
  });

  it('another thread writes the wasm memory through the alias', async () => {
    const wasm = new Memory({ initial: 1 });
    const alias = mem.aliasShared(wasm.buffer);
    const worker = new Worker(
      'const { workerData, parentPort } = require("node:worker_threads"); new ' +
        'Float32Array(workerData).fill(7, 4, 8); parentPort.postMessage(0);',
      { eval: true, workerData: alias },
    );
    await new Promise((resolve) => worker.once('message', resolve));
    await worker.terminate();
    expect([...new Float32Array(wasm.buffer, 0, 9)]).toEqual([0, 0, 0, 0, 7, 7, 7, 7, 0]);
  });

  it('refuses what it cannot alias', () => {
    expect(() => mem.aliasShared(new ArrayBuffer(0))).toThrow(/empty or detached/);
    expect(() => mem.aliasShared(new Float32Array(4) as unknown as ArrayBuffer)).toThrow(/expected an ArrayBuffer/);
  });

  it('allFinite finds NaN and ±Infinity anywhere, in the vector body and the tail, through subarrays', () => {
    const values = new Float32Array(1003).fill(-3.4e38);
    expect(mem.allFinite(values)).toBe(true);
    for (const at of [0, 7, 8, 500, 999, 1000, 1002]) {
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        values[at] = bad;
        expect(mem.allFinite(values)).toBe(false);
        expect(mem.allFinite(values.subarray(at === 0 ? 1 : 0, at === 0 ? 1003 : at))).toBe(true);
        values[at] = 1;
      }
    }
    expect(mem.allFinite(new Float32Array(0))).toBe(true);
    expect(mem.allFinite(new Float32Array(new SharedArrayBuffer(64)))).toBe(true);
  });

  it('allFiniteAsync answers as allFinite, from the thread pool, and keeps the memory alive meanwhile', async () => {
    const values = new Float32Array(1003).fill(2.5e38);
    const pending: Promise<boolean>[] = [];
    const want: boolean[] = [];
    for (const at of [0, 8, 999, 1002]) {
      for (const bad of [Number.NaN, Number.NEGATIVE_INFINITY]) {
        const copy = values.slice();
        copy[at] = bad;
        pending.push(mem.allFiniteAsync(copy), mem.allFiniteAsync(copy.subarray(at === 0 ? 1 : 0, at || 1003)));
        want.push(false, true);
      }
    }
    const heap = new Memory({ initial: 1 });
    const view = new Float32Array(mem.aliasShared(heap.buffer), 64, 100);
    pending.push(mem.allFiniteAsync(view));
    want.push(true);
    heap.grow(1); // detaches the buffer the alias was made over; the check still reads valid memory
    expect(await Promise.all(pending)).toEqual(want);
    expect(() => mem.allFiniteAsync(new Float64Array(2) as unknown as Float32Array)).toThrow(/allFiniteAsync/);
  });
});
