import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { crossEntropy, Tensor, tensor } from '../index.js';

const logits = () => tensor([0.3, -1.2, 2, 0.5, 0.1, -0.4], [2, 3], { requiresGrad: true });

// torch 1.13: F.cross_entropy(x, torch.full((2,), -100)) is nan with x.grad all 0; 'sum' is 0.
describe('crossEntropy when no label counts (a batch of padding only)', () => {
  it('averages to NaN as torch (was 0), with a zero and finite gradient', async () => {
    const x = logits();
    const loss = crossEntropy(x, [-100, -100]);
    expect(loss.item()).toBeNaN();
    await loss.backward();
    expect(Array.from(x.grad!.dataSync())).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('is NaN for a batch of no rows under mean, 0 under sum, as torch', () => {
    const none = () => new Tensor(tf.zeros([0, 3]), { requiresGrad: true });
    expect(crossEntropy(none(), []).item()).toBeNaN();
    expect(Math.abs(crossEntropy(none(), [], { reduction: 'sum' }).item())).toBe(0);
  });

  it('counts only the labels not ignored otherwise: sum 0 and none 0 for the ignored rows', async () => {
    const x = logits();
    expect(Math.abs(crossEntropy(x, [7, 7], { ignoreIndex: 7, reduction: 'sum' }).item())).toBe(0);
    expect(Array.from(crossEntropy(x, [-100, -100], { reduction: 'none' }).dataSync()).map(Math.abs)).toEqual([0, 0]);
    // one label counts: its own loss (torch: 0.7308714389801025), not halved by the ignored row
    expect(crossEntropy(x, [-100, 0]).item()).toBeCloseTo(0.7308714, 6);
  });
});
