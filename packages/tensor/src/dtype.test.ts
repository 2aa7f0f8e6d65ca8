import { describe, expect, it } from 'vitest';
import {
  bytesPerElement,
  DTypeError,
  dtypeInfo,
  encodeFloat16,
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
