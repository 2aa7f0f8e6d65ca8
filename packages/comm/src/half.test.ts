import { describe, expect, it } from 'vitest';
import { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from './half.js';

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
});
