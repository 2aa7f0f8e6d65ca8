import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, tensor } from './index.js';
import { disposeAll } from './test/utils.js';

const values = (t: tf.Tensor | null): number[] => Array.from(t!.dataSync());

describe('assigning .grad and .data', () => {
  // was: taken as the gradient, and the optimizer's step failed inside tfjs (probe U)
  it("takes an autograd Tensor (torch's p.grad = torch.zeros_like(p)) as a copy of its data", () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const g = tensor([4, 5, 6], [3]);
    x.grad = g;
    expect(x.grad).toBeInstanceOf(tf.Tensor);
    expect(values(x.grad)).toEqual([4, 5, 6]);
    x.grad = null; // frees the copy, not the user's tensor
    expect(values(g.data)).toEqual([4, 5, 6]);
    const before = tf.memory().numTensors;
    expect(() => {
      x.grad = tensor([1, 2], [2]);
    }).toThrow(/different size/);
    expect(tf.memory().numTensors).toBe(before + 1); // the refused [2] tensor itself, not a copy of it
    disposeAll(x, g);
  });

  // was: a [2, 1] gradient was taken, the next backward made it [2, 3], and SGD broadcast the parameter to [2, 3]
  it('refuses a gradient of another shape or dtype, as torch', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const wrongShape = tf.zeros([2, 1]);
    const wrongType = tf.zeros([3], 'int32');
    // torch: x.grad = torch.zeros(2, 1) -> RuntimeError: assigned grad has data of a different size
    expect(() => {
      x.grad = wrongShape;
    }).toThrow(AutogradArgumentError);
    expect(() => {
      x.grad = wrongShape;
    }).toThrow(/assigned grad has data of a different size: \[2,1\] for Tensor\(shape=\[3\]/);
    // torch: x.grad = torch.zeros(3, dtype=torch.int32) -> RuntimeError: assigned grad has data of a different type
    expect(() => {
      x.grad = wrongType;
    }).toThrow(/assigned grad has data of a different type: int32/);
    expect(x.grad).toBeNull();
    await x.mul(2).sum().backward();
    expect(values(x.grad)).toEqual([2, 2, 2]); // torch: (x * 2).sum().backward(); x.grad -> [2, 2, 2]
    disposeAll(x, wrongShape, wrongType);
  });

  it('refuses data of another shape and keeps the old data', () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const wrongShape = tf.zeros([2, 3]);
    expect(() => {
      x.data = wrongShape;
    }).toThrow(/assigned data of shape \[2,3\] to Tensor\(shape=\[3\].*may not change shape/);
    expect(values(x.data)).toEqual([1, 2, 3]);
    x.data = tf.fill([3], 5);
    expect(values(x.data)).toEqual([5, 5, 5]);
    disposeAll(x, wrongShape);
  });

  // was: p.grad = null disposed the tensor q still held: TypeError "reading 'backend'" in q's next backward
  it('lets two leaves share one gradient tensor; the last holder frees it', async () => {
    const p = tensor([1, 2, 3], [3], { requiresGrad: true });
    const q = tensor([4, 5, 6], [3], { requiresGrad: true });
    await q.mul(2).sum().backward();
    const before = tf.memory().numTensors;
    p.grad = q.grad;
    expect(p.grad).toBe(q.grad); // torch: p.grad is q.grad -> True
    p.grad = null;
    await q.mul(2).sum().backward();
    expect(values(q.grad)).toEqual([4, 4, 4]); // torch: q.grad after the second backward -> [4, 4, 4]
    p.grad = q.grad;
    q.grad = null;
    expect(values(p.grad)).toEqual([4, 4, 4]); // torch: still held by p
    q.dispose();
    expect(values(p.grad)).toEqual([4, 4, 4]);
    p.grad = null;
    expect(tf.memory().numTensors).toBe(before - 1); // q's data gone, and the shared gradient with its last holder
    p.dispose();
  });
});
