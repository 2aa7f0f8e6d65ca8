import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradFunction, type Context, gradcheck, randn, type Tensor, tensor } from './index.js';

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

  // `NaN > worst` was false: a backward returning NaN, or a function NaN where it was checked, passed
  it('fails on NaN, analytic or numeric, as torch does', async () => {
    class NanBackward extends AutogradFunction {
      forward(_ctx: Context, x: tf.Tensor) {
        return tf.mul(x, 2);
      }
      backward(_ctx: Context, dy: tf.Tensor) {
        return tf.mul(dy, Number.NaN);
      }
    }
    const x = tensor([1, 2, 3], undefined, { requiresGrad: true });
    const nan = await gradcheck((t) => NanBackward.apply<Tensor>(t), [x]);
    expect(nan.ok).toBe(false);
    expect(nan.message).toMatch(/analytic NaN/);
    // one NaN among finite gradients: the finite errors after it replaced it, and the check passed
    class PartlyNan extends AutogradFunction {
      forward(_ctx: Context, x: tf.Tensor) {
        return tf.mul(x, 2);
      }
      backward(_ctx: Context, dy: tf.Tensor) {
        return tf.mul(dy, tf.tensor([Number.NaN, 2, 2]));
      }
    }
    expect((await gradcheck((t) => PartlyNan.apply<Tensor>(t), [x])).ok).toBe(false);
    const negative = tensor([-1, -2], undefined, { requiresGrad: true });
    expect((await gradcheck((t) => t.log(), [negative])).ok).toBe(false);
    tf.dispose([x.data, negative.data]);
  });
});
