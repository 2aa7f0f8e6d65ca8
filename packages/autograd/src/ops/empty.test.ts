import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { crossEntropy, max, mean, mse, sum, Tensor } from '../index.js';

const empty = () => new Tensor(tf.zeros([0, 3]), { requiresGrad: true });

describe('an empty batch (a rank given no rows)', () => {
  it('sums to 0 and averages to NaN as torch, with an empty gradient (was: stale heap values on wasm)', async () => {
    tf.tidy(() => tf.fill([4096], 7.25).dataSync()); // what an unwritten output would hold
    const x = empty();
    const total = sum(x);
    expect([total.item(), mean(x).item(), Array.from(max(x, { dim: 0 }).dataSync())]).toEqual([
      0,
      Number.NaN,
      [-Infinity, -Infinity, -Infinity],
    ]);
    await total.backward();
    expect(x.grad!.shape).toEqual([0, 3]);
    expect(Math.abs(crossEntropy(empty(), [], { reduction: 'sum' }).item())).toBe(0); // -0: the negated sum
    expect(mse(empty(), new Tensor(tf.zeros([0, 3])), { reduction: 'sum' }).item()).toBe(0);
  });
});
