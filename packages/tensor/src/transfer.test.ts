import { afterAll, describe, expect, it } from 'vitest';
import { copyTensorInto, getBackend, setBackend, tensorFromFloat32, tf } from './index.js';

const initial = getBackend();
afterAll(() => setBackend(initial as 'wasm'));

describe.each(['wasm', 'cpu'] as const)('transfer on %s', (backend) => {
  it('copies a tensor into a buffer at an offset, reshaped views included', async () => {
    await setBackend(backend);
    const t = tf.tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const view = tf.reshape(t, [6]); // shares t's data
    const target = new Float32Array(new SharedArrayBuffer(4 * 10)).fill(-1);
    copyTensorInto(view, target, 3);
    expect([...target]).toEqual([-1, -1, -1, 1, 2, 3, 4, 5, 6, -1]);
    const computed = tf.mul(t, 2); // a kernel's output, not an upload
    copyTensorInto(computed, target, 0);
    expect([...target.subarray(0, 6)]).toEqual([2, 4, 6, 8, 10, 12]);
    tf.dispose([t, view, computed]);
  });

  it('makes tensors that do not alias the buffer they came from', async () => {
    await setBackend(backend);
    const buffer = Float32Array.of(9, 1, 2, 3, 4, 9);
    const t = tensorFromFloat32(buffer.subarray(1, 5), [2, 2]);
    buffer.fill(0);
    expect([...t.dataSync()]).toEqual([1, 2, 3, 4]);
    expect(t.shape).toEqual([2, 2]);
    t.dispose();
  });

  it('refuses other dtypes and buffers too small', async () => {
    await setBackend(backend);
    const ints = tf.tensor([1, 2], [2], 'int32');
    const floats = tf.tensor([1, 2, 3]);
    expect(() => copyTensorInto(ints, new Float32Array(2))).toThrow(/float32 tensor, got int32/);
    expect(() => copyTensorInto(floats, new Float32Array(4), 2)).toThrow(RangeError);
    tf.dispose([ints, floats]);
  });
});
