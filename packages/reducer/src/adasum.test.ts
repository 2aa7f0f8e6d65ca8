import { describe, expect, it } from 'vitest';
import { AdasumError, adasumAllReduce, adasumPair } from './adasum.js';

const pairOf = (a: number[], b: number[], segments?: { offset: number; size: number }[]) => {
  const out = new Float32Array(a.length);
  adasumPair(Float32Array.from(a), Float32Array.from(b), out, segments);
  return Array.from(out);
};

describe('adasumPair', () => {
  it('equal vectors average, orthogonal ones add up', () => {
    expect(pairOf([1, 2], [1, 2])).toEqual([1, 2]);
    expect(pairOf([1, 0], [0, 3])).toEqual([1, 3]);
  });

  // probe CK: Horovod keeps coefficient 1 below a squared norm of 1e-8 (adasum.h); ddp did only at 0,
  // so small equal steps averaged where Horovod's add up (20-35 % off on 1e-5-sized segments)
  it("a vector of squared norm below 1e-8 keeps coefficient 1, as Horovod's", () => {
    const small = [1e-5, -2e-5, 3e-5];
    const sum = small.map((x) => Math.fround(Math.fround(x) + Math.fround(x)));
    expect(pairOf(small, small)).toEqual(sum);
    // one small, one not: the small one's coefficient is 1, the other's 1 − a·b/2|b|²
    const [a, b] = [
      [1e-5, 0],
      [1, 1],
    ];
    const cb = 1 - (Math.fround(1e-5) * 1) / (2 * 2);
    expect(pairOf(a, b)[1]).toBeCloseTo(cb, 7);
  });

  // probe CK: a gap kept each rank's own values, an overlap made ranks disagree, past the end gave NaN
  it.each([
    [
      'a gap',
      [
        { offset: 0, size: 1 },
        { offset: 2, size: 2 },
      ],
      /segment 1 .*offset 1 was expected/,
    ],
    [
      'an overlap',
      [
        { offset: 0, size: 3 },
        { offset: 2, size: 2 },
      ],
      /segment 1 .*offset 3 was expected/,
    ],
    ['past the end', [{ offset: 0, size: 6 }], /cover 6 of its 4 elements/],
    ['too short', [{ offset: 0, size: 3 }], /cover 3 of its 4 elements/],
    ['a negative offset', [{ offset: -1, size: 5 }], /segment 0 .*offset 0 was expected/],
    ['a fractional size', [{ offset: 0, size: 1.5 }], /segment 0/],
  ])('segments with %s: AdasumError', (_, segments, message) => {
    expect(() => pairOf([1, 2, 3, 4], [4, 3, 2, 1], segments)).toThrow(AdasumError);
    expect(() => pairOf([1, 2, 3, 4], [4, 3, 2, 1], segments)).toThrow(message);
  });

  // review: DDP's bucket lists its members in order but packs the small gradients first; ordered segments were
  // refused, so adasumHook raised on every backward of a model with a layer of 65 536 weights or more
  it('takes segments in any order that tile the buffer', () => {
    const segments = [
      { offset: 2, size: 2 },
      { offset: 0, size: 2 },
    ];
    expect(pairOf([1, 2, 3, 4], [1, 2, 3, 4], segments)).toEqual([1, 2, 3, 4]);
  });

  it('adasumAllReduce refuses such segments before any exchange, naming the rank', async () => {
    const group = { rank: 1, size: 2, ranks: [0, 1] } as never; // no exchange may run: it has none
    await expect(adasumAllReduce(new Float32Array(4), group, [{ offset: 0, size: 2 }])).rejects.toThrow(
      /^adasumAllReduce \(rank 1\): segments must tile the buffer; they cover 2 of its 4 elements/,
    );
  });
});
