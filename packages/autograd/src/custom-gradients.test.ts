import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { AutogradError, AutogradFunction, type Context, sum, type Tensor, tensor } from './index.js';

/** y = 2x whose backward returns `grad(dy, ctx)` for x. */
function doubling(grad: (dy: tf.Tensor, ctx: Context) => tf.Tensor, save = false) {
  return class extends AutogradFunction {
    forward(ctx: Context, x: tf.Tensor) {
      if (save) ctx.saveForBackward(x);
      return tf.mul(x, 2);
    }
    backward(ctx: Context, dy: tf.Tensor) {
      return grad(dy, ctx);
    }
  };
}
const leaf = () => tensor([1, 2, 3], undefined, { requiresGrad: true });
/** x's gradient values (a function: TypeScript keeps `x.grad = null` narrowed across awaits). */
const gradOf = (x: Tensor): number[] => [...(x.grad?.dataSync() ?? [])];

describe("what a custom backward returns is checked as torch's validate_outputs does", () => {
  // a [1] gradient became the [3] leaf's .grad, or broadcast into the other path's sum ([2,2,2]), silently
  it('a gradient of a shape the input does not broadcast to: AutogradError naming the function and index', async () => {
    for (const [grad, got] of [
      [(dy: tf.Tensor) => tf.slice(dy, [0], [1]), '1'],
      [(dy: tf.Tensor) => tf.sum(dy), ''],
      [(dy: tf.Tensor) => tf.concat([dy, dy]), '6'],
    ] as const) {
      const Wrong = doubling(grad);
      const x = leaf();
      const y = sum(Wrong.apply<Tensor>(x)).add(sum(x));
      const error = await y.backward().catch((e: Error) => e);
      expect(error).toBeInstanceOf(AutogradError);
      expect(String(error)).toContain(`returned an invalid gradient at index 0: got [${got}] but expected shape `);
      expect(String(error)).toContain('compatible with [3]');
      expect(x.grad).toBe(null);
      tf.dispose([x.data, y.data]);
    }
    const Right = doubling(() => tf.ones([3]));
    await expect(sum(Right.apply<Tensor>(leaf())).backward()).resolves.toBeUndefined();
  });

  it('a gradient the input broadcasts to is summed down; an int32 one is cast to float32', async () => {
    const Broadcast = doubling((dy) => tf.stack([dy, dy]));
    const x = leaf();
    await sum(Broadcast.apply<Tensor>(x)).backward();
    expect(gradOf(x)).toEqual([2, 2, 2]);
    const Integer = doubling((dy) => tf.cast(tf.mul(dy, 2.7), 'int32'));
    const z = leaf();
    await sum(Integer.apply<Tensor>(z)).backward();
    expect(z.grad?.dtype).toBe('float32');
    expect(gradOf(z)).toEqual([2, 2, 2]);
  });

  // release() disposed the saved tensor the backward handed back: .grad came out disposed
  it("a backward returning a saved tensor, or one from outside: .grad holds it, the outside one stays the caller's", async () => {
    const Saved = doubling((_dy, ctx) => ctx.savedTensors[0], true);
    const x = leaf();
    await sum(Saved.apply<Tensor>(x)).backward();
    expect(gradOf(x)).toEqual([1, 2, 3]);
    const outside = tf.tensor([4, 5, 6]);
    const Outside = doubling(() => outside);
    const z = leaf();
    const before = tf.memory().numTensors;
    for (let i = 0; i < 2; i++) {
      z.grad = null;
      const y = sum(Outside.apply<Tensor>(z));
      await y.backward();
      y.dispose();
    }
    expect(gradOf(z)).toEqual([4, 5, 6]);
    z.grad = null;
    expect(outside.isDisposed).toBe(false);
    expect(tf.memory().numTensors).toBe(before);
  });

  // the engine took the hook's tensor itself: zeroing .grad disposed the user's tensor
  it("a tensor hook returning the user's own tensor: the gradient is a copy, the user's stays", async () => {
    const c = tf.tensor([5, 5, 5]);
    const x = leaf();
    x.registerHook(() => c);
    await sum(x.mul(2)).backward();
    await sum(x.mul(2)).backward();
    expect(gradOf(x)).toEqual([10, 10, 10]);
    x.grad = null;
    await sum(x.mul(2)).backward();
    expect(gradOf(x)).toEqual([5, 5, 5]);
    expect([...c.dataSync()]).toEqual([5, 5, 5]);
  });
});

describe('a forward that throws after saving tensors for backward', () => {
  /** Saves a copy of its input, then fails (as conv2d's kernel did after its layout transposes). */
  class SavesThenThrows extends AutogradFunction {
    forward(ctx: Context, x: tf.Tensor): tf.Tensor {
      ctx.saveForBackward(x, x);
      throw new AutogradError('kernel failed');
    }
    backward(): null[] {
      return [null];
    }
  }
  class SavesThenRejects extends AutogradFunction {
    async forward(ctx: Context, x: tf.Tensor): Promise<tf.Tensor> {
      ctx.saveForBackward(x, x);
      throw new AutogradError('kernel failed');
    }
    backward(): null[] {
      return [null];
    }
  }

  it('frees what it saved, sync and async (was: 2 tensors leaked per failed call)', async () => {
    const x = tensor([1, 2, 3, 4], [2, 2], { requiresGrad: true });
    const before = tf.memory().numTensors;
    expect(() => SavesThenThrows.apply(x)).toThrow(/kernel failed/);
    await expect(SavesThenRejects.applyAsync(x)).rejects.toThrow(/kernel failed/);
    expect(tf.memory().numTensors).toBe(before);
    x.dispose();
  });
});
