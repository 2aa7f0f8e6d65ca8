import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { lossWeights } from './loss-weights.js';

describe('lossWeights', () => {
  it("weights a 'mean' by class indices not ignored, and by every element of a float target", () => {
    expect(lossWeights([[1, -100, 2], [0]], [undefined, undefined], 'mean', 0)).toEqual([2 / 3, 1 / 3]);
    // a regression's targets may be negative: all of them count (was: only the non-negative ones, 1 and 3 of 2 and 4)
    const targets = [
      tf.tensor([[-1, 2]]),
      tf.tensor([
        [3, -4],
        [5, 6],
      ]),
    ];
    expect(lossWeights(targets, [undefined, undefined], 'mean', 0)).toEqual([1 / 3, 2 / 3]);
    expect(lossWeights(targets, [3, 1], 'mean', 0)).toEqual([3 / 4, 1 / 4]);
    expect(lossWeights(targets, [undefined, undefined], 'sum', 0)).toEqual([1, 1]);
    tf.dispose(targets);
  });

  it('a list holding fractions is a regression target: every entry counts (was: the negative ones dropped)', () => {
    // weights 0.2 / 0.8 before, for two micro-batches of 4 values each
    expect(
      lossWeights(
        [
          [
            [0.5, -1.5],
            [-2, -0.25],
          ],
          [
            [1, 2],
            [3, 4],
          ],
        ],
        [undefined, undefined],
        'mean',
        1,
      ),
    ).toEqual([1 / 2, 1 / 2]);
  });

  it('a float32 tensor of integers holding -100 is refused as ambiguous (was: every entry counted, padding too)', () => {
    const labels = [tf.tensor([3, -100]), tf.tensor([1, 2])];
    expect(() => lossWeights(labels, [undefined, undefined], 'mean', 1)).toThrow(
      /stage 1: micro-batch 0's target is a float32 tensor of integers holding -100: class indices/,
    );
    const asInt = labels.map((t) => tf.cast(t, 'int32'));
    expect(lossWeights(asInt, [undefined, undefined], 'mean', 1)).toEqual([1 / 3, 2 / 3]);
    expect(lossWeights(labels, [1, 2], 'mean', 1)).toEqual([1 / 3, 2 / 3]);
    tf.dispose([...labels, ...asInt]);
  });
});
