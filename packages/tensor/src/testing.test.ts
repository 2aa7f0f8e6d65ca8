import { countTensorsDelta, expectNoLeaks, TensorLeakError } from '@ddp/tensor/testing';
import { describe, expect, it } from 'vitest';
import { tf } from './index.js';

describe('leak helpers', () => {
  it('counts tensors left behind by sync and async functions', async () => {
    const kept: tf.Tensor[] = [];
    expect(await countTensorsDelta(() => kept.push(tf.ones([2])))).toBe(1);
    expect(
      await countTensorsDelta(async () => {
        await new Promise((r) => setTimeout(r, 1));
        kept.push(tf.zeros([1]), tf.zeros([1]));
      }),
    ).toBe(2);
    tf.dispose(kept);
  });

  it('passes clean functions and fails leaking ones', async () => {
    await expectNoLeaks(() => tf.tidy(() => tf.add(tf.ones([3]), 1).dataSync()));
    await expectNoLeaks(async () => {
      const t = tf.ones([3]);
      await t.data();
      t.dispose();
    });
    let leaked: tf.Tensor | undefined;
    const check = expectNoLeaks(
      async () => {
        leaked = tf.ones([2]);
      },
      { label: 'leaky step' },
    );
    await expect(check).rejects.toThrow(TensorLeakError);
    await expect(check).rejects.toThrow(/leaky step leaked 1 tensor/);
    leaked?.dispose();
  });
});
