import { describe, expect, it } from 'vitest';
import {
  bfloatToFloat,
  decodeBfloat16,
  encodeBfloat16,
  encodeFloat16,
  floatToBfloat,
  floatToHalf,
  halfToFloat,
} from './index.js';

describe('float16 / bfloat16 words', () => {
  it('round-trips every finite float16 word', () => {
    for (let w = 0; w < 0x10000; w++) {
      if ((w & 0x7c00) === 0x7c00) continue;
      expect(floatToHalf(halfToFloat(w))).toBe(w);
    }
  });
  it('rounds to nearest even and saturates to infinity', () => {
    expect(halfToFloat(floatToHalf(1 + 2 ** -11))).toBe(1); // tie → even
    expect(halfToFloat(floatToHalf(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9);
    expect(halfToFloat(floatToHalf(70000))).toBe(Number.POSITIVE_INFINITY);
    expect(halfToFloat(floatToHalf(2 ** -24))).toBe(2 ** -24);
    expect(Number.isNaN(halfToFloat(floatToHalf(Number.NaN)))).toBe(true);
  });
  it('bfloat16 keeps the top 16 bits, rounding to nearest even', () => {
    expect(bfloatToFloat(floatToBfloat(1.5))).toBe(1.5);
    expect(bfloatToFloat(floatToBfloat(1 + 2 ** -8))).toBe(1); // tie → even
    expect(bfloatToFloat(floatToBfloat(1 + 3 * 2 ** -8))).toBe(1 + 2 ** -6);
    expect(Number.isNaN(bfloatToFloat(floatToBfloat(Number.NaN)))).toBe(true);
  });
  it('the scalar and the array functions agree on every word', () => {
    const words = Uint16Array.from({ length: 0x10000 }, (_, w) => w);
    const asBfloat = decodeBfloat16(words);
    const asHalf = Float32Array.from(words, halfToFloat);
    expect(Array.from(encodeFloat16(asHalf))).toEqual(Array.from(asHalf, floatToHalf));
    expect(Array.from(encodeBfloat16(asBfloat))).toEqual(Array.from(asBfloat, floatToBfloat));
    expect(Array.from(asBfloat)).toEqual(Array.from(words, bfloatToFloat));
  });
});
