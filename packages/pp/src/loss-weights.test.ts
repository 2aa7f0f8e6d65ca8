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
});
