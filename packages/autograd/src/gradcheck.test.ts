import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradFunction, type Context, gradcheck, randn, type Tensor } from './index.js';

class WrongSquare extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor) {
    ctx.saveForBackward(x);
    return tf.square(x);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    return tf.mul(dy, tf.mul(2.1, ctx.savedTensors[0])); // deliberately 5% off
  }
}

describe('gradcheck', () => {
  it('rejects a wrong backward and accepts the right one', async () => {
    const x = randn([3, 2], { requiresGrad: true, seed: 3 });
    const wrong = await gradcheck((t) => WrongSquare.apply<Tensor>(t), [x]);
    expect(wrong.ok).toBe(false);
    const right = await gradcheck((t) => t.square(), [x]);
    expect(right.ok, right.message).toBe(true);
    x.dispose();
  });
});
