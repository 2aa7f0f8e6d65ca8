import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, crossEntropy, max, mean, min, mse, sum, Tensor } from '../index.js';

const empty = () => new Tensor(tf.zeros([0, 3]), { requiresGrad: true });

describe('an empty batch (a rank given no rows)', () => {
  it('sums to 0, averages to NaN and refuses a max over no element as torch (was: stale heap values on wasm)', async () => {
    tf.tidy(() => tf.fill([4096], 7.25).dataSync()); // what an unwritten output would hold
    const x = empty();
    const total = sum(x);
    expect([total.item(), mean(x).item(), mean(x, { dim: 0 }).shape]).toEqual([0, Number.NaN, [3]]);
    // torch.amax/amin over an empty dim raise (was −∞ / +∞ here); over a non-empty one the result is empty
    expect(() => max(x, { dim: 0 })).toThrow(/max: dim 0 of \[0,3\] is empty, so it has no maximum/);
    expect(() => min(x)).toThrow(AutogradArgumentError);
    expect(() => max(new Tensor(tf.zeros([2, 0])), { dim: -1 })).toThrow(/max: dim 1 of \[2,0\] is empty/);
    expect(max(x, { dim: 1 }).shape).toEqual([0]);
    await total.backward();
    expect(x.grad!.shape).toEqual([0, 3]);
    expect(Math.abs(crossEntropy(empty(), [], { reduction: 'sum' }).item())).toBe(0); // -0: the negated sum
    expect(mse(empty(), new Tensor(tf.zeros([0, 3])), { reduction: 'sum' }).item()).toBe(0);
  });
});
