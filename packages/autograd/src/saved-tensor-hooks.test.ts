import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { linear, tensor, tidy, withSavedTensorHooks } from './index.js';

describe('withSavedTensorHooks', () => {
  it('keeps a packed weight as a reference: its memory is freed until backward, which reads it refilled', async () => {
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3], { requiresGrad: true });
    const w = tensor([0.5, -1, 2, 1, 0, -0.5], [2, 3], { requiresGrad: true });
    const values = w.data.dataSync().slice();
    const id = w.data.dataId;
    const unpacked: string[] = [];
    const hooks = {
      pack: (t: tf.Tensor) => (t.dataId === id ? 'w' : undefined),
      unpack: (name: string) => {
        unpacked.push(name);
        return w.data.clone();
      },
    };
    const y = withSavedTensorHooks(hooks, () => tidy(() => linear(x, w).sum()));
    // numDataBuffers counts storage (numBytes counts every handle on it)
    const buffers = tf.memory().numDataBuffers;
    w.data = tf.zeros([2, 3]); // the weight's storage released (the zeros take a new one)...
    expect(tf.memory().numDataBuffers).toBe(buffers); // ...as nothing else held the old one
    w.data = tf.tensor(values, [2, 3]); // refilled, as FSDP's pre-backward gather does
    const before = tf.memory().numTensors;
    await y.backward();
    expect(unpacked).toEqual(['w']);
    // d(sum(x W^T))/dx = column sums of W; /dW = column sums of x
    expect([...x.grad!.dataSync()]).toEqual([1.5, -1, 1.5, 1.5, -1, 1.5]);
    expect([...w.grad!.dataSync()]).toEqual([5, 7, 9, 5, 7, 9]);
    y.dispose();
    expect(tf.memory().numTensors).toBeLessThanOrEqual(before + 2); // the two gradients
    for (const t of [x, w]) t.dispose();
  });

  it('keeps tensors as usual outside the hooks and where pack returns undefined', async () => {
    const w = tensor([1, 2], [1, 2], { requiresGrad: true });
    const x = tensor([3, 4], [1, 2]);
    const y = withSavedTensorHooks({ pack: () => undefined, unpack: () => tf.scalar(0) }, () => linear(x, w).sum());
    w.data = tf.zeros([1, 2]); // the graph kept its own handle on the old values
    await y.backward();
    expect([...w.grad!.dataSync()]).toEqual([3, 4]);
    for (const t of [x, w, y]) t.dispose();
  });
});
