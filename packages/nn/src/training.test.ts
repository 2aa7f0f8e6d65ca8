import { fromTf, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { expectNoLeaks } from '@ddp/tensor/testing';
import { describe, expect, it } from 'vitest';
import { Generator } from './generator.js';
import { ReLU } from './layers/activation.js';
import { Sequential } from './layers/container.js';
import { Conv2d, MaxPool2d } from './layers/conv.js';
import { Flatten } from './layers/flatten.js';
import { Linear } from './layers/linear.js';
import { BatchNorm2d } from './layers/norm.js';
import { CrossEntropyLoss } from './losses.js';
import { WarmupCosineLR } from './lr-scheduler.js';
import { AdamW } from './optim/adam.js';
import { clipGradNorm } from './optim/clip-grad.js';

describe('a training loop', () => {
  it('learns a toy task with AdamW, clipping and warm-up/cosine, leaking no tensors', async () => {
    const g = new Generator(0);
    const model = new Sequential(
      new Conv2d(1, 4, 3, { padding: 1, generator: g }),
      new BatchNorm2d(4),
      new ReLU(),
      new MaxPool2d(2),
      new Flatten(),
      new Linear(4 * 2 * 2, 2, { generator: g }),
    );
    const opt = new AdamW(model.parameters(), { lr: 0.05, weightDecay: 0.01 });
    const sched = new WarmupCosineLR(opt, { warmupSteps: 3, totalSteps: 40 });
    const lossFn = new CrossEntropyLoss();
    // Class 1 images are bright in the top-left corner, class 0 dark.
    const labels = Array.from({ length: 8 }, (_, i) => i % 2);
    const images = tf.tidy(() => {
      const noise = tf.randomNormal([8, 1, 4, 4], 0, 0.3, 'float32', 3);
      const corner = tf.pad(tf.ones([1, 1, 2, 2]), [
        [0, 0],
        [0, 0],
        [0, 2],
        [0, 2],
      ]);
      return tf.add(noise, tf.mul(tf.reshape(tf.tensor(labels, [8], 'float32'), [8, 1, 1, 1]), corner));
    });
    const x = fromTf(images);
    const losses: number[] = [];
    const step = async () => {
      const loss = tidy(() => lossFn.forward(model.forward(x), labels));
      await loss.backward();
      losses.push(loss.item());
      loss.dispose();
      clipGradNorm(model.parameters(), 1.0);
      opt.step();
      sched.step();
      opt.zeroGrad();
    };
    await step();
    for (let i = 0; i < 3; i++) await expectNoLeaks(step, { label: `training step ${i + 2}` });
    for (let i = 0; i < 30; i++) await step();
    expect(losses.at(-1)).toBeLessThan(losses[0] * 0.5);
    x.dispose();
    opt.dispose();
    model.dispose();
  });
});
