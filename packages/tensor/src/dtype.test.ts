import { afterAll, describe, expect, it } from 'vitest';
import {
  bytesPerElement,
  DTypeError,
  dtypeInfo,
  encodeFloat16,
  getBackend,
  setBackend,
  tensorFromTypedArray,
  tensorToTypedArray,
  tensorToTypedArraySync,
  tf,
} from './index.js';

describe('dtype information', () => {
  it('knows sizes and array types', () => {
    expect(bytesPerElement('float32')).toBe(4);
    expect(bytesPerElement('float64')).toBe(8);
    expect(bytesPerElement('int32')).toBe(4);
    expect(bytesPerElement('float16')).toBe(2);
    expect(bytesPerElement('bfloat16')).toBe(2);
    expect(dtypeInfo('bfloat16').ArrayType).toBe(Uint16Array);
    expect(dtypeInfo('float64').ArrayType).toBe(Float64Array);
    expect(() => dtypeInfo('int8')).toThrow(DTypeError);
  });
});

describe('typed array <-> tensor', () => {
  it('copies both ways, converting dtypes', async () => {
    const src = new Float32Array([1.5, -2, 3.25, 4]);
    const t = tensorFromTypedArray(src, [2, 2]);
    src[0] = 99; // the tensor owns a copy
    expect(t.shape).toEqual([2, 2]);
    expect(Array.from(await tensorToTypedArray(t))).toEqual([1.5, -2, 3.25, 4]);
    expect(await tensorToTypedArray(t, 'float64')).toBeInstanceOf(Float64Array);
    expect(Array.from(tensorToTypedArraySync(t, 'int32'))).toEqual([1, -2, 3, 4]);
    expect(Array.from(tensorToTypedArraySync(t, 'float16'))).toEqual(Array.from(encodeFloat16([1.5, -2, 3.25, 4])));
    t.dispose();
  });

  it('reads float16/bfloat16 bits and int32', () => {
    const h = tensorFromTypedArray(new Uint16Array([0x3c00, 0xc000]), [2], 'float16');
    const b = tensorFromTypedArray(new Uint16Array([0x3f80, 0x4049]), [2], 'bfloat16');
    const i = tensorFromTypedArray(new Int32Array([7, -3]), [2]);
    expect(Array.from(h.dataSync())).toEqual([1, -2]);
    expect(Array.from(b.dataSync())).toEqual([1, 3.140625]);
    expect(i.dtype).toBe('int32');
    tf.dispose([h, b, i]);
  });

  it('rejects mismatched data', () => {
    expect(() => tensorFromTypedArray(new Float32Array(3), [2, 2])).toThrow(DTypeError);
    expect(() => tensorFromTypedArray(new Uint16Array(2), [2])).toThrow(/ambiguous/);
    expect(() => tensorFromTypedArray(new Float32Array(2), [2], 'int32')).toThrow(DTypeError);
  });
});

describe.each(['wasm', 'cpu'] as const)('reading a tensor into a typed array on %s', (backend) => {
  const initial = getBackend();
  afterAll(() => setBackend(initial as 'wasm'));

  it('gives an array of its own: writing to it leaves the tensor as it was (was: the cpu storage itself)', async () => {
    await setBackend(backend);
    const f = tf.tensor([1, 2, 3]);
    const i = tf.tensor([1, 2, 3], [3], 'int32');
    tensorToTypedArraySync(f)[0] = 99;
    (await tensorToTypedArray(i))[0] = 77;
    expect([Array.from(f.dataSync()), Array.from(i.dataSync())]).toEqual([
      [1, 2, 3],
      [1, 2, 3],
    ]);
    tf.dispose([f, i]);
  });

  it('to int32: truncates toward zero as torch, refuses a value with no int32 (was: wrapped, NaN became 0)', async () => {
    await setBackend(backend);
    const fine = tf.tensor([-2.7, 2.7, 2147483520, -2147483648]);
    expect(Array.from(tensorToTypedArraySync(fine, 'int32'))).toEqual([-2, 2, 2147483520, -2147483648]);
    for (const bad of [3e9, -3e9, Number.NaN, Number.POSITIVE_INFINITY, 2147483648]) {
      const t = tf.tensor([0, bad]);
      expect(() => tensorToTypedArraySync(t, 'int32')).toThrow(`element 1 is ${bad}, which has no int32 value`);
      await expect(tensorToTypedArray(t, 'int32')).rejects.toThrow(DTypeError);
      t.dispose();
    }
    fine.dispose();
  });
});
