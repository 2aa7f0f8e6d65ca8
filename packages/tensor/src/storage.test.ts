import { afterAll, describe, expect, it } from 'vitest';
import { getBackend, getTransferStats, setBackend, tf, writeInPlace } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

describe('writeInPlace', () => {
  it('on wasm, overwrites a tensor that alone owns its storage: same tensor, new values, counted', async () => {
    await setBackend('wasm');
    const t = tf.mul(tf.ones([2, 3]), 2); // a kernel's output, as gradients are
    const before = getTransferStats();
    expect(writeInPlace(t, Float32Array.of(1, 2, 3, 4, 5, 6))).toEqual({ written: true, finite: true });
    expect([...t.dataSync()]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(getTransferStats().writtenInPlace - before.writtenInPlace).toBe(6);
    t.dispose();
  });

  it('refuses storage another tensor shares (reshape), a disposed tensor, other dtypes: nothing written', async () => {
    await setBackend('wasm');
    const t = tf.tensor([1, 2, 3, 4]);
    const view = tf.reshape(t, [2, 2]);
    expect(writeInPlace(t, Float32Array.of(9, 9, 9, 9)).written).toBe(false);
    expect([...view.dataSync()]).toEqual([1, 2, 3, 4]);
    view.dispose();
    expect(writeInPlace(t, Float32Array.of(9, 9, 9, 9)).written).toBe(true); // the view gone, t owns it again
    t.dispose();
    expect(writeInPlace(t, Float32Array.of(9, 9, 9, 9)).written).toBe(false);
    const ints = tf.tensor([1, 2], [2], 'int32');
    expect(writeInPlace(ints, Float32Array.of(9, 9)).written).toBe(false);
    ints.dispose();
    const small = tf.tensor([1, 2]);
    expect(() => writeInPlace(small, Float32Array.of(1, 2, 3))).toThrow(RangeError);
    small.dispose();
  });

  it('checkFinite: finds NaN and ±Inf at any position, in place or not; not the largest finite values', async () => {
    await setBackend('wasm');
    const t = tf.mul(tf.ones([5]), 1);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      for (let at = 0; at < 5; at++) {
        const values = Float32Array.of(1, -2, 3, 4, 5);
        values[at] = bad;
        expect(writeInPlace(t, values, { checkFinite: true })).toEqual({ written: true, finite: false });
        const view = tf.reshape(t, [5]); // shared: not written, still checked
        expect(writeInPlace(t, values, { checkFinite: true })).toEqual({ written: false, finite: false });
        view.dispose();
      }
    }
    expect(writeInPlace(t, Float32Array.of(3.4e38, -3.4e38, 1e-45, 0, -0), { checkFinite: true })).toEqual({
      written: true,
      finite: true,
    });
    expect([...t.dataSync()]).toEqual([3.4e38, -3.4e38, 1e-45, 0, -0].map(Math.fround));
    t.dispose();
  });

  it("writes nothing on the cpu backend, whose tensors may hold the caller's own array", async () => {
    await setBackend('cpu');
    const values = Float32Array.of(1, 2);
    const t = tf.tensor(values);
    expect(writeInPlace(t, Float32Array.of(7, 8)).written).toBe(false);
    expect([...values]).toEqual([1, 2]);
    t.dispose();
  });

  it('stays correct after the wasm heap grows (views are never kept)', async () => {
    await setBackend('wasm');
    const t = tf.mul(tf.ones([4]), 1);
    const big = tf.zeros([8 * 1024 * 1024]); // 32 MiB: the heap grows and its ArrayBuffer is replaced
    expect(writeInPlace(t, Float32Array.of(4, 3, 2, 1)).written).toBe(true);
    expect([...t.dataSync()]).toEqual([4, 3, 2, 1]);
    tf.dispose([t, big]);
  });
});
