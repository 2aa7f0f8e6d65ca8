import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradArgumentError, GradientHookError, tensor } from './index.js';
import { disposeAll } from './test/utils.js';

const values = (t: tf.Tensor | null): number[] => Array.from(t!.dataSync());

describe('leaf hooks and requiresGrad', () => {
  // was: w.grad became [2, 4, 6] and its hooks ran
  it('a leaf set to requiresGrad = false after the forward gets no gradient and runs no hooks', async () => {
    const w = tensor([1, 2, 3], [3], { requiresGrad: true });
    const v = tensor([1, 1, 1], [3], { requiresGrad: true });
    const fired: string[] = [];
    w.registerHook(() => void fired.push('tensor hook'));
    w.registerPostAccumulateGradHook(() => void fired.push('post-accumulate hook'));
    const y = w.mul(w).sum().add(v.mul(w).sum());
    w.requiresGrad = false;
    await y.backward();
    // torch: y = (w*w).sum() + (v*w).sum(); w.requires_grad = False; y.backward() -> w.grad None, v.grad [1, 2, 3]
    expect(w.grad).toBeNull();
    expect(values(v.grad)).toEqual([1, 2, 3]);
    expect(fired).toEqual([]); // torch: a hook registered on w before is not called
    disposeAll(w, v, y);
  });

  // was: the int32 gradient became x.grad
  it('refuses a hook that changes the gradient dtype, naming the hook and its tensor', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    x.registerHook(function toInt(g) {
      return tf.cast(g, 'int32');
    });
    const y = x.mul(2).sum();
    // torch: hook 'toInt' has changed the type of value (was torch.FloatTensor got torch.IntTensor)
    await expect(y.backward()).rejects.toBeInstanceOf(GradientHookError);
    const again = x.mul(2).sum();
    await expect(again.backward()).rejects.toThrow(
      /hook 'toInt' on Tensor\(shape=\[3\], requiresGrad=true\) has changed the type of the gradient/,
    );
    const third = x.mul(2).sum();
    await expect(third.backward()).rejects.toThrow(/\(was float32, got int32\)/);
    expect(x.grad).toBeNull(); // torch: x.grad None
    disposeAll(x, y, again, third);
  });
});

describe('retainGrad', () => {
  it('keeps a non-leaf gradient in .grad, accumulating over backwards as torch', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const y = x.mul(x).retainGrad();
    const weights = tensor([1, 10, 100]);
    const z = y.mul(weights).sum();
    await z.backward(undefined, { retainGraph: true });
    expect(values(y.grad)).toEqual([1, 10, 100]); // torch: y.retain_grad(); z.backward(retain_graph=True) -> y.grad
    await z.backward();
    expect(values(y.grad)).toEqual([2, 20, 200]); // torch: a second z.backward() -> y.grad [2, 20, 200]
    expect(values(x.grad)).toEqual([4, 80, 1200]);
    expect(y.retainsGrad).toBe(true);
    expect(x.retainGrad().retainsGrad).toBe(false); // torch: a leaf's retains_grad stays False
    disposeAll(x, y, z, weights);
  });

  it('sees the gradient as the hooks registered before it left it, sums every use, and works on the root', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const first = x.mul(3).retainGrad();
    first.registerHook((g) => tf.mul(g, 2));
    await first.mul(first).sum().backward();
    expect(values(first.grad)).toEqual([6, 12, 18]); // torch: y.retain_grad(); y.register_hook(g*2) -> y.grad
    const later = x.mul(3);
    later.registerHook((g) => tf.mul(g, 2));
    later.retainGrad();
    await later.mul(later).sum().backward();
    expect(values(later.grad)).toEqual([12, 24, 36]); // torch: hook first, then retain_grad -> y.grad
    const twice = x.mul(2).retainGrad();
    await twice.mul(twice).sum().add(twice.mul(5).sum()).backward();
    expect(values(twice.grad)).toEqual([9, 13, 17]); // torch: ((y*y).sum() + (y*5).sum()).backward() -> y.grad
    const root = x.mul(x).sum().retainGrad();
    await root.backward();
    expect(values(root.grad)).toEqual([1]); // torch: the root's y.grad -> 1
    disposeAll(x, first, later, twice, root);
  });

  it('refuses a tensor that does not require grad; disposing the tensor frees its gradient', async () => {
    const constant = tensor([1]);
    expect(() => constant.retainGrad()).toThrow(AutogradArgumentError); // torch: can't retain_grad on Tensor ...
    constant.dispose();
    const x = tensor([1, 2], [2], { requiresGrad: true });
    const before = tf.memory().numTensors;
    const y = x.exp().retainGrad();
    const loss = y.sum();
    await loss.backward();
    expect(y.grad).not.toBeNull();
    disposeAll(y, loss);
    x.grad = null;
    expect(tf.memory().numTensors).toBe(before);
    x.dispose();
  });
});
