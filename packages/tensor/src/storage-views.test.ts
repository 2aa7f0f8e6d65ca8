import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, ownedHeapView, setBackend, storageViews, tf, writeInPlace } from './index.js';
import { activeWasmBackend } from './wasm-heap.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

/** The heap offset tfjs-wasm's malloc returns next for `bytes` (what a freed block of that size gives back). */
function nextBlock(bytes: number): number {
  const wasm = activeWasmBackend()!.wasm;
  const at = wasm._malloc(bytes) >>> 0;
  wasm._free(at);
  return at;
}

describe('storageViews', () => {
  it('gives tensors over parts of one storage: their values, usable by kernels, without a copy', async () => {
    await setBackend('wasm');
    const flat = tf.range(0, 10, 1, 'float32');
    const [a, b] = storageViews(flat, [
      { offset: 0, shape: [2, 2] },
      { offset: 4, shape: [3, 2] },
    ])!;
    flat.dispose(); // the views keep the storage
    expect(a.shape).toEqual([2, 2]);
    expect([...a.dataSync()]).toEqual([0, 1, 2, 3]);
    expect([...b.dataSync()]).toEqual([4, 5, 6, 7, 8, 9]);
    const product = tf.matMul(a, tf.ones([2, 1]));
    expect([...product.dataSync()]).toEqual([1, 5]);
    const [inner] = storageViews(b, [{ offset: 2, shape: [2] }])!; // a view of a view: the same storage
    expect([...inner.dataSync()]).toEqual([6, 7]);
    tf.dispose([a, b, inner, product]);
  });

  it('frees the storage with the last view, and the engine forgets it (no leak)', async () => {
    await setBackend('wasm');
    const bytes = 1 << 20;
    const before = tf.memory();
    const flat = tf.fill([bytes / 4], 1);
    const views = storageViews(flat, [
      { offset: 0, shape: [10] },
      { offset: 10, shape: [bytes / 4 - 10] },
    ])!;
    const at = activeWasmBackend()!.dataIdMap.get(flat.dataId)!.memoryOffset;
    flat.dispose();
    views[0].dispose();
    expect(nextBlock(bytes)).not.toBe(at); // still held by the other view
    views[1].dispose();
    expect(nextBlock(bytes)).toBe(at);
    const after = tf.memory();
    expect([after.numTensors, after.numDataBuffers, after.numBytes]).toEqual([
      before.numTensors,
      before.numDataBuffers,
      before.numBytes,
    ]);
  });

  it('keeps the owner alive for its own tensors too, whichever goes first', async () => {
    await setBackend('wasm');
    const flat = tf.tensor([1, 2, 3, 4]);
    const [v] = storageViews(flat, [{ offset: 1, shape: [2] }])!;
    v.dispose();
    expect([...flat.dataSync()]).toEqual([1, 2, 3, 4]);
    flat.dispose();
  });

  // a view owned "alone" by its record would take in-place writes meant for one tensor into its siblings
  it('is never written in place, nor is its owner while views exist', async () => {
    await setBackend('wasm');
    const flat = tf.mul(tf.ones([4]), 2);
    const [a, b] = storageViews(flat, [
      { offset: 0, shape: [2] },
      { offset: 2, shape: [2] },
    ])!;
    expect(ownedHeapView(a)).toBeNull();
    expect(writeInPlace(a, Float32Array.of(9, 9)).written).toBe(false);
    expect(writeInPlace(flat, Float32Array.of(9, 9, 9, 9)).written).toBe(false);
    expect([...b.dataSync()]).toEqual([2, 2]);
    tf.dispose([flat, a, b]);
  });

  it('refuses parts outside the tensor; null off wasm', async () => {
    await setBackend('wasm');
    const flat = tf.tensor([1, 2, 3]);
    expect(() => storageViews(flat, [{ offset: 2, shape: [2] }])).toThrow(RangeError);
    flat.dispose();
    await setBackend('cpu');
    const other = tf.tensor([1, 2, 3]);
    expect(storageViews(other, [{ offset: 0, shape: [1] }])).toBeNull();
    other.dispose();
  });
});
