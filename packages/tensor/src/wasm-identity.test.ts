import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, setBackend, tf } from './index.js';
import { activeWasmBackend, heapOffset } from './wasm-heap.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

describe('tf.clone on wasm', () => {
  it('shares the data, and each tensor keeps it alive until both are disposed', async () => {
    await setBackend('wasm');
    const before = tf.memory().numTensors;
    const x = tf.tensor([1, 2, 3, 4], [2, 2]);
    const y = tf.clone(x);
    const backend = activeWasmBackend()!;
    expect(heapOffset(backend, y)).toBe(heapOffset(backend, x)); // no copy
    x.dispose();
    const z = tf.add(y, 1); // new allocations must not reuse the shared buffer while y holds it
    expect(Array.from(y.dataSync())).toEqual([1, 2, 3, 4]);
    expect(Array.from(z.dataSync())).toEqual([2, 3, 4, 5]);
    tf.dispose([y, z]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('keeps a variable apart from the tensor it was made of and from what it is assigned', async () => {
    await setBackend('wasm');
    const x = tf.tensor([1, 2]);
    const v = tf.variable(tf.clone(x));
    v.assign(tf.tensor([5, 6]));
    expect(Array.from(x.dataSync())).toEqual([1, 2]);
    expect(Array.from(v.dataSync())).toEqual([5, 6]);
    tf.dispose([x, v]);
  });

  it('copies strings as before', async () => {
    await setBackend('wasm');
    const s = tf.tensor(['a', 'b']);
    const c = tf.clone(s);
    s.dispose();
    expect(c.dataSync()).toEqual(['a', 'b']);
    c.dispose();
  });
});
