import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, max, mean, min, permute, reshape, sum, tensor } from '../index.js';

const values = (t: { dataSync(): ArrayLike<number> }) => Array.from(t.dataSync());

/**
 * torch's positional spellings give torch's results. `x.sum(1)` was read as an options object
 * with no keys and summed every element (shape [] instead of [2]), silently.
 */
describe("torch's positional dims and sizes", () => {
  // x = [[1, 2, 3], [4, 5, 6]]: torch x.sum(1) = [6, 15], x.mean(-1) = [2, 5], x.amax(0) = [4, 5, 6]
  const x = () => tensor([1, 2, 3, 4, 5, 6], [2, 3]);

  it('reductions take a dim, a list of dims and keepdim after them, as torch', () => {
    const before = tf.memory().numTensors;
    const got = tf.tidy(() => ({
      sum1: [values(x().sum(1)), x().sum(1).shape],
      sumFn: values(sum(x(), 1)),
      meanLast: values(x().mean(-1)),
      max0: values(max(x(), 0)),
      min1Keep: [values(min(x(), 1, true)), min(x(), 1, true).shape],
      meanBoth: [values(mean(x(), [0, 1])), mean(x(), [0, 1]).shape],
      sameAsOptions: values(sum(x(), { dim: 1, keepdim: true })),
    }));
    expect(got).toEqual({
      sum1: [[6, 15], [2]],
      sumFn: [6, 15],
      meanLast: [2, 5],
      max0: [4, 5, 6],
      min1Keep: [
        [1, 4],
        [2, 1],
      ],
      meanBoth: [[3.5], []],
      sameAsOptions: [6, 15],
    });
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses keepdim beside an options object, and dims that are neither', () => {
    expect(() => sum(x(), { dim: 1 }, true)).toThrow(AutogradArgumentError);
    expect(() => sum(x(), 'rows' as never)).toThrow(/sum: dims must be a number, an array or \{ dim, keepdim \}/);
  });

  it('reshape, view and permute methods take sizes as numbers or one array; the functions refuse a number', () => {
    expect(x().reshape(3, 2).shape).toEqual([3, 2]);
    expect(x().view(-1).shape).toEqual([6]);
    expect(x().view([3, -1]).shape).toEqual([3, 2]);
    expect(values(x().permute(1, 0))).toEqual([1, 4, 2, 5, 3, 6]);
    expect(() => reshape(x(), 6 as never)).toThrow(/reshape: expected an array of sizes, got 6/);
    expect(() => permute(x(), 1 as never)).toThrow(AutogradArgumentError);
  });
});
