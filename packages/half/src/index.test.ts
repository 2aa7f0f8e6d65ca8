import { describe, expect, it } from 'vitest';
import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from './index.js';

const f16 = (x: number) => encodeFloat16([x])[0];
const bf16 = (x: number) => encodeBfloat16([x])[0];
function bitsToF32(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0];
}

describe('float16', () => {
  it('encodes known bit patterns', () => {
    const cases: [number, number][] = [
      [1, 0x3c00],
      [-2, 0xc000],
      [0.1, 0x2e66],
      [1 / 3, 0x3555],
      [65504, 0x7bff],
      [65519, 0x7bff],
      [65520, 0x7c00],
      [1e6, 0x7c00],
      [-1e6, 0xfc00],
      [0, 0x0000],
      [-0, 0x8000],
      [Infinity, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400],
      [1023 * 2 ** -24, 0x03ff],
      [2 ** -24, 0x0001],
      [-(2 ** -24), 0x8001],
      [2 ** -25, 0x0000],
      [1.5 * 2 ** -25, 0x0001],
      [3 * 2 ** -25, 0x0002],
      [5 * 2 ** -25, 0x0002],
      [2 ** -26, 0x0000],
      [1e-10, 0x0000],
      [(2047 / 2) * 2 ** -24, 0x0400],
      [1 + 2 ** -11, 0x3c00],
      [1 + 3 * 2 ** -11, 0x3c02],
      [2049, 0x6800],
      [2051, 0x6802],
    ];
    for (const [x, bits] of cases) expect(f16(x), `f16(${x})`).toBe(bits);
    const nan = f16(Number.NaN);
    expect(nan & 0x7c00).toBe(0x7c00);
    expect(nan & 0x3ff).not.toBe(0);
  });

  it('decodes subnormals, infinities and NaN', () => {
    const out = decodeFloat16(
      new Uint16Array([0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3555]),
    );
    expect(Array.from(out.slice(0, 6))).toEqual([2 ** -24, 1023 * 2 ** -24, 2 ** -14, 65504, Infinity, -Infinity]);
    expect(out[6]).toBeNaN();
    expect(Object.is(out[7], -0)).toBe(true);
    expect(out[8]).toBe(0.333251953125);
  });

  it('round-trips every non-NaN pattern and rounds every midpoint to even', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const finite = all.filter((h) => (h & 0x7c00) !== 0x7c00 || (h & 0x3ff) === 0);
    expect(Array.from(encodeFloat16(decodeFloat16(finite)))).toEqual(Array.from(finite));
    // Midpoints between consecutive positive halves (exact in float32) go to the even neighbour.
    const values = decodeFloat16(new Uint16Array(0x7c00).map((_, i) => i));
    const mids = new Float32Array(values.length - 1).map((_, i) => (values[i] + values[i + 1]) / 2);
    const rounded = encodeFloat16(mids);
    for (let i = 0; i < mids.length; i++) {
      const even = i % 2 === 0 ? i : i + 1;
      if (rounded[i] !== even) throw new Error(`midpoint after 0x${i.toString(16)} gave 0x${rounded[i]?.toString(16)}`);
    }
  });
});

describe('bfloat16', () => {
  it('encodes known bit patterns', () => {
    const cases: [number, number][] = [
      [1, 0x3f80],
      [-2, 0xc000],
      [Math.PI, 0x4049],
      [3.140625, 0x4049],
      [0, 0],
      [-0, 0x8000],
      [Infinity, 0x7f80],
      [-Infinity, 0xff80],
      [bitsToF32(0x7f7fffff), 0x7f80],
      [bitsToF32(0x3f808000), 0x3f80],
      [bitsToF32(0x3f818000), 0x3f82],
      [bitsToF32(0x3f808001), 0x3f81],
      [bitsToF32(0x00000001), 0x0000],
      [bitsToF32(0x00008000), 0x0000],
      [bitsToF32(0x00018000), 0x0002],
      [bitsToF32(0x00010000), 0x0001],
      [bitsToF32(0x80018000), 0x8002],
    ];
    for (const [x, bits] of cases) expect(bf16(x), `bf16(${x})`).toBe(bits);
    expect(bf16(Number.NaN)).toBe(0x7fc0);
    expect(bf16(bitsToF32(0x7f800001))).toBe(0x7fc0); // signalling NaN stays NaN, never inf
  });

  it('round-trips every non-NaN pattern', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const finite = all.filter((h) => (h & 0x7f80) !== 0x7f80 || (h & 0x7f) === 0);
    expect(Array.from(encodeBfloat16(decodeBfloat16(finite)))).toEqual(Array.from(finite));
    expect(decodeBfloat16(new Uint16Array([0x7fc1]))[0]).toBeNaN();
  });
});

describe('an out array', () => {
  const values = new Float32Array([1, 2, 3, 4, 5]);
  it('of the input length is written and returned', () => {
    const out = new Uint16Array(5);
    expect(encodeFloat16(values, out)).toBe(out);
    expect(Array.from(decodeBfloat16(encodeBfloat16(values), new Float32Array(5)))).toEqual([1, 2, 3, 4, 5]);
  });
  it('of another length is refused by every codec (a short one dropped values, a long one kept a stale tail)', () => {
    const halves = encodeFloat16(values);
    expect(() => encodeFloat16(values, new Uint16Array(3))).toThrow('encodeFloat16: out has 3 elements, the input 5');
    expect(() => encodeBfloat16(values, new Uint16Array(8))).toThrow('encodeBfloat16: out has 8 elements, the input 5');
    expect(() => decodeFloat16(halves, new Float32Array(2))).toThrow(RangeError);
    expect(() => decodeBfloat16(halves, new Float32Array(6))).toThrow(
      'decodeBfloat16: out has 6 elements, the input 5',
    );
  });
});
