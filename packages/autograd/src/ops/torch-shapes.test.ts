import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  batchNormStats,
  chunk,
  concat,
  flatten,
  indexSelect,
  l2Normalize,
  logSoftmax,
  narrow,
  pad,
  slice,
  softmax,
  split,
  squeeze,
  sum,
  type Tensor,
  tensor,
  transpose,
  unsqueeze,
  where,
} from '../index.js';

const x6 = () => tensor([0, 1, 2, 3, 4, 5], [6]);
const shapes = (ts: { shape: number[] }[]) => ts.map((t) => t.shape[0]);

// Each case is what torch 1.13 gives or refuses; before, each gave another result without an error.
describe('shape ops as torch', () => {
  it('split(x, n) cuts pieces of size n as torch.split (was: n pieces, as tf.split), chunk(x, n) n pieces', () => {
    expect(shapes(split(x6(), 2))).toEqual([2, 2, 2]); // was [3, 3]
    expect(shapes(split(tensor([0, 1, 2, 3, 4, 5, 6], [7]), 3))).toEqual([3, 3, 1]); // was an untyped error
    expect(shapes(x6().split(4))).toEqual([4, 2]);
    const qkv = tensor(
      Array.from({ length: 12 }, (_, i) => i),
      [2, 6],
    );
    const [q, k, v] = qkv.split(2, -1); // torch: q, k, v = qkv.split(d, dim=-1)
    expect([q.shape, k.shape, v.shape, Array.from(v.dataSync())]).toEqual([
      [2, 2],
      [2, 2],
      [2, 2],
      [4, 5, 10, 11],
    ]);
    expect(shapes(chunk(tensor(Array(10).fill(0), [10]), 3))).toEqual([4, 4, 2]);
    expect(shapes(x6().chunk(4))).toEqual([2, 2, 2]);
    expect(shapes(split(x6(), [1, 5]))).toEqual([1, 5]);
    expect(() => split(x6(), [1, 1])).toThrow(/split: sizes \[1,1\] do not add up to dim 0 of \[6\]/);
    expect(() => split(x6(), 0)).toThrow(AutogradArgumentError);
    expect(() => chunk(x6(), 0)).toThrow(AutogradArgumentError);
  });

  it('refuses a reduction over a dim given twice or out of range (was: [0, 0] summed over every dim)', () => {
    const m = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => sum(m, { dim: [0, 0] })).toThrow(/sum: dim 0 appears more than once/);
    expect(() => sum(m, { dim: [1, -1] })).toThrow(AutogradArgumentError);
    expect(() => sum(m, { dim: 2 })).toThrow(/sum: dim 2 is out of range for a tensor of rank 2/);
    expect(Array.from(sum(m, { dim: [0, 1] }).dataSync())).toEqual([10]);
    expect(sum(tensor([5], []), { dim: 0 }).item()).toBe(5); // a scalar takes dim 0, as in torch
  });

  it('narrow and slice refuse a block outside the tensor (was: a [5, 2] block of stale memory); narrow counts a negative start from the end', () => {
    const m = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => narrow(m, 0, 1, 5)).toThrow(/narrow: start 1 \+ length 5 exceeds dim 0 of \[2,2\]/);
    expect(() => slice(m, [0, 1], [2, 2])).toThrow(/slice: begin 1, size 2 along dim 1 is outside \[2,2\]/);
    expect(() => slice(m, [-1, 0], [1, 2])).toThrow(AutogradArgumentError);
    expect(Array.from(narrow(m, 0, -1, 1).dataSync())).toEqual([3, 4]);
    expect(Array.from(slice(m, [1, 0], [-1, 1]).dataSync())).toEqual([3]);
  });

  it('flatten refuses startDim after endDim (was: a [2, 1, 2] tensor); pad refuses negative pads (was an untyped wasm RuntimeError)', () => {
    const m = tensor([1, 2, 3, 4], [2, 2]);
    expect(() => flatten(m, 1, 0)).toThrow(/flatten: startDim 1 comes after endDim 0/);
    expect(flatten(m, -2, -1).shape).toEqual([4]);
    expect(flatten(tensor([7], [])).shape).toEqual([1]);
    // probe CY: a scalar took any dims (nn.Flatten()'s startDim 1 among them); torch's are those of a vector
    expect(flatten(tensor([7], []), -1, 0).shape).toEqual([1]);
    expect(() => flatten(tensor([7], []), 1)).toThrow(AutogradArgumentError);
    // probe CZ: tfjs's plain Error for operands that do not broadcast, and a TypeError splitting an empty dim
    const [a, b] = [tensor([1, 2], [2]), tensor([1, 2, 3], [3])];
    expect(() => where(tensor([1, 0], [2], { dtype: 'bool' }), a, b)).toThrow(/where: shapes \[2\] and \[3\] cannot/);
    expect(split(tensor([], [0]), [], 0)).toEqual([]);
    expect(() => pad(tensor([1, 2, 3, 4], [4]), [[-1, 0]])).toThrow(/pad: paddings must be non-negative integers/);
  });

  it('refuses a dim out of range in every op that takes one (was: concat along -3 of a matrix joined its columns, unsqueeze(x, 5) appended a dim, softmax(x, -3) ran over dim 1)', () => {
    const m = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const outOfRange: [string, (x: Tensor) => unknown][] = [
      ['concat: dim -3', (x) => concat([x, x], -3)],
      ['concat: dim 2', (x) => concat([x, x], 2)],
      ['softmax: dim -3', (x) => softmax(x, -3)],
      ['logSoftmax: dim 2', (x) => logSoftmax(x, 2)],
      ['l2Normalize: dim 4', (x) => l2Normalize(x, 4)],
      ['transpose: dim -3', (x) => transpose(x, 0, -3)],
      ['transpose: dim 0.5', (x) => transpose(x, 0.5, 1)],
      ['squeeze: dim 5', (x) => squeeze(x, 5)],
      ['narrow: dim 5', (x) => narrow(x, 5, 0, 1)],
      ['indexSelect: dim 4', (x) => indexSelect(x, 4, [0])],
      ['batchNormStats: dim 3', (x) => batchNormStats(x, [0, 3])],
      ['unsqueeze: dim 4 is out of range [-3, 2]', (x) => unsqueeze(x, 4)],
      ['unsqueeze: dim -4', (x) => unsqueeze(x, -4)],
      ['unsqueeze: dim 1.5', (x) => unsqueeze(x, 1.5)],
    ];
    for (const [message, op] of outOfRange) {
      expect(() => op(m), message).toThrow(AutogradArgumentError);
      expect(() => op(m), message).toThrow(message);
    }
    // in range, negative dims count from the end as in torch
    expect(concat([m, m], -2).shape).toEqual([4, 3]);
    expect(unsqueeze(m, -1).shape).toEqual([2, 3, 1]);
    expect(unsqueeze(m, 2).shape).toEqual([2, 3, 1]);
    expect(transpose(m, -1, 0).shape).toEqual([3, 2]);
    expect(Array.from(softmax(m, -2).dataSync()).map((v) => +v.toFixed(4))).toEqual([
      0.0474, 0.0474, 0.0474, 0.9526, 0.9526, 0.9526,
    ]);
  });
});
