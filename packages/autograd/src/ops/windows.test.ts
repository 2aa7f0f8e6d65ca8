import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, conv2d, maxPool2d, tensor } from '../index.js';

const x = () =>
  tensor(
    Array.from({ length: 16 }, (_, i) => i - 8),
    [1, 1, 4, 4],
  );
const w = (k: number) => tensor(Array(k * k).fill(1), [1, 1, k, k]);

// torch 1.13 raises for each refused case; before, each gave an output without an error.
describe('conv2d and maxPool2d windows torch refuses', () => {
  it('a kernel larger than the padded input (was: an empty [1, 1, 0, 0] output for conv2d)', () => {
    expect(() => conv2d(x(), w(5))).toThrow(
      /conv2d: kernel \[5,5\] is larger than the input \[1,1,4,4\] padded by \[0,0\]/,
    );
    expect(() => maxPool2d(x(), 5)).toThrow(AutogradArgumentError);
    expect(conv2d(x(), w(5), null, { padding: 1 }).shape).toEqual([1, 1, 2, 2]);
    expect(maxPool2d(x(), 4).shape).toEqual([1, 1, 1, 1]);
  });

  it('max-pool padding over half the kernel (was: windows lying in the padding pooled)', () => {
    expect(() => maxPool2d(x(), 2, { padding: 2 })).toThrow(
      /maxPool2d: padding \[2,2\] must be at most half the kernel \[2,2\]/,
    );
    expect(maxPool2d(x(), 3, { padding: 1, stride: 1 }).shape).toEqual([1, 1, 4, 4]);
  });

  it('a kernel or stride below 1, a negative padding (were untyped RangeErrors)', () => {
    expect(() => maxPool2d(x(), 0)).toThrow(AutogradArgumentError);
    expect(() => maxPool2d(x(), 2, { stride: 0 })).toThrow(AutogradArgumentError);
    expect(() => conv2d(x(), w(2), null, { stride: 0 })).toThrow(AutogradArgumentError);
    expect(() => conv2d(x(), w(2), null, { padding: -1 })).toThrow(/padding \[-1,-1\] >= 0/);
  });

  it("sizes as torch takes them: [v] is v for both; other lengths, 'same', a non-4-D input or bias refused", () => {
    // before: [1] reached the kernels as [1, undefined]: a wasm out-of-bounds write into other tensors
    const other = tensor([0, 1, 2, 3], [4]);
    expect(maxPool2d(x(), 2, { padding: [1] }).shape).toEqual([1, 1, 3, 3]);
    expect(conv2d(x(), w(2), null, { stride: [2], padding: [1] }).shape).toEqual([1, 1, 3, 3]);
    expect(Array.from(other.dataSync())).toEqual([0, 1, 2, 3]);
    for (const bad of [[1, 1, 1], [], 'same'])
      expect(() => conv2d(x(), w(2), null, { padding: bad as never })).toThrow(
        /conv2d: padding must be a number or a list of 1 or 2 numbers/,
      );
    expect(() => maxPool2d(x(), 2, { stride: [1, 1, 5] as never })).toThrow(AutogradArgumentError);
    const unbatched = tensor(Array(16).fill(1), [1, 4, 4]);
    expect(() => maxPool2d(unbatched, 2)).toThrow(/maxPool2d: input must be 4-D \[N, C, H, W\]/);
    // probe CY: no channels came back empty, with XNNPACK's errors on stderr (torch raises); an empty batch is fine
    const noChannels = tensor(new Float32Array(0), [1, 0, 4, 4]);
    expect(() => maxPool2d(noChannels, 2)).toThrow(/with C, H, W > 0 .*got \[1,0,4,4\]/);
    noChannels.dispose();
    const bias = tensor([1], [1, 1]);
    expect(() => conv2d(x(), w(2), bias)).toThrow(/conv2d: bias must be 1-D of 1 elements, got \[1,1\]/);
  });
});
