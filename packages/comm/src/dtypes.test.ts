import { describe, expect, it } from 'vitest';
import { checkGatherInto, checkReduceScatter } from './api/arg-checks.js';
import { dtypeOf, MAX_MOVED_BYTES, movedDtype } from './dtypes.js';
import { InvalidArgumentError } from './errors.js';
import { bytes } from './scheduling/staging.js';

describe('the arrays an op takes', () => {
  it('a half dtype on an array that is not a Uint16Array is refused (was: allReduce summed it in float32, the option dropped)', () => {
    expect(() => dtypeOf(new Float32Array(2), 'float16')).toThrow(/names the 16-bit words of a Uint16Array/);
    expect(() => dtypeOf(new Int32Array(2), 'bfloat16')).toThrow(InvalidArgumentError);
    expect(dtypeOf(new Uint16Array(2), 'bfloat16')).toBe('bfloat16');
    // ops that only move data take a Uint16Array's words without a dtype named
    expect([movedDtype(new Uint16Array(2)), movedDtype(new Float32Array(2))]).toEqual(['float16', 'float32']);
    expect(() => movedDtype(new Float64Array(2), 'float16')).toThrow(InvalidArgumentError);
  });

  it("an array whose buffer was detached under an op: a typed error naming the cause (was: V8's TypeError)", () => {
    const a = new Float32Array(4);
    structuredClone(a.buffer, { transfer: [a.buffer] }); // as a WebAssembly.Memory's growth detaches a heap view
    expect(() => bytes(a)).toThrow(/was detached while the op held it/);
    expect(bytes(new Float32Array(4)).byteLength).toBe(16);
  });

  // probe BM: broadcast raised a bare RangeError, allGatherInto and reduceScatter an error saying it was detached
  it('an array over 4 GiB that an op would move: a typed error naming the limit, before any byte is touched', () => {
    const big = new Float32Array(2 ** 30 + 1); // 4 GiB + 4 bytes, its pages never touched
    expect(big.byteLength).toBeGreaterThan(MAX_MOVED_BYTES);
    for (const refused of [
      () => movedDtype(big, undefined, 'broadcast'),
      () => bytes(big),
      () => checkGatherInto(big, new Float32Array(2 ** 29 + 1), 2),
      () => checkReduceScatter(new Float32Array(2 ** 29 + 1), big, 2),
    ])
      expect(refused).toThrow(/arrays an op moves hold at most 2\^32 − 1 bytes \(4 GiB\)/);
  });

  it('an array over a resizable ArrayBuffer is refused (was: shrunk under an op, its result cut short silently)', () => {
    const resizable = new (ArrayBuffer as unknown as new (n: number, o: object) => ArrayBuffer)(16, {
      maxByteLength: 64,
    });
    for (const refused of [() => dtypeOf(new Float32Array(resizable)), () => movedDtype(new Float32Array(resizable))])
      expect(refused).toThrow(/resizable ArrayBuffer: its length may change while an op holds it/);
  });
});
