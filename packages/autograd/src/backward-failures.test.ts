import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradError,
  AutogradFunction,
  type Context,
  checkpoint,
  GradientHookError,
  GraphFreedError,
  type Tensor,
  type TensorHook,
  tensor,
  tidy,
} from './index.js';
import { disposeAll } from './test/utils.js';

const values = (t: tf.Tensor | null): number[] => Array.from(t!.dataSync(), (v) => Math.round(v * 1000) / 1000);

/** l = sum(exp(x) * x) at x = [1, 2, 3]: dl/dx = exp(x) (1 + x). */
const lossOf = (x: Tensor) => x.exp().mul(x).sum();
const once = [5.437, 22.167, 80.342];

class ThrowsInBackward extends AutogradFunction {
  forward(ctx: Context, x: tf.Tensor): tf.Tensor {
    ctx.saveForBackward(x);
    return tf.mul(x, 2);
  }
  backward(): tf.Tensor[] {
    throw new AutogradError('backward failed');
  }
}

describe('backwards started before the last one ended (probe AY)', () => {
  it('a second backward over a graph that one not awaited frees is refused, the gradient counted once', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const l = lossOf(x);
    const first = l.backward(); // torch's habit: backward() not awaited
    await expect(l.backward()).rejects.toBeInstanceOf(GraphFreedError); // was: both ran, the gradient doubled
    await first;
    expect(values(x.grad)).toEqual(once);
    const l2 = lossOf(x);
    x.grad = null;
    const both = await Promise.allSettled([l2.backward(), l2.backward()]);
    expect(both.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect(values(x.grad)).toEqual(once);
    disposeAll(x, l, l2);
  });

  it('backwards that retain the graph may overlap, and add up as torch', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const l = lossOf(x);
    await Promise.all([l.backward(undefined, { retainGraph: true }), l.backward(undefined, { retainGraph: true })]);
    expect(values(x.grad)).toEqual([10.873, 44.334, 160.684]);
    await l.backward();
    disposeAll(x, l);
  });
});

describe('tensor hooks returning what backward cannot use (probe AY)', () => {
  it('an async hook is refused, typed (was: its promise dropped, the gradient unchanged)', async () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    x.registerHook((async (g: tf.Tensor) => tf.mul(g, 10)) as unknown as TensorHook); // untyped JS
    const l = x.mul(x).sum();
    await expect(l.backward()).rejects.toThrow(GradientHookError);
    await expect(x.mul(x).sum().backward()).rejects.toThrow(/returned a Promise/);
    expect(x.grad).toBeNull();
    disposeAll(x, l);
  });
});

describe('a backward that fails leaves nothing behind (probe AY: what the nodes not reached saved leaked)', () => {
  const failures: [string, (x: Tensor) => Tensor][] = [
    [
      'a leaf hook throws',
      (x) => {
        x.registerHook(() => {
          throw new Error('hook failed');
        });
        return x;
      },
    ],
    [
      'a hook returns another shape',
      (x) => {
        const h = x.tanh();
        h.registerHook(() => tf.zeros([7]));
        return h;
      },
    ],
    ['a backward throws', (x) => ThrowsInBackward.apply(x)],
  ];
  for (const [what, middle] of failures) {
    it(`${what}: after the loss is disposed, no tensor is left`, async () => {
      const x = tensor([1, 2, 3, 4], [2, 2], { requiresGrad: true });
      const before = tf.memory().numTensors;
      for (let i = 0; i < 3; i++) {
        const l = tidy(() => middle(x.exp().mul(x).sigmoid()).matmul(x).exp().sum());
        await expect(l.backward()).rejects.toThrow();
        await expect(l.backward()).rejects.toBeInstanceOf(GraphFreedError); // spent, as torch's
        l.dispose();
        expect(tf.memory().numTensors).toBe(before);
      }
      x.dispose();
    });
  }

  it('retainGrad on an intermediate a tidy disposed keeps no gradient (was: one leaked per backward)', async () => {
    const x = tensor([1, 2, 3, 4], [2, 2], { requiresGrad: true });
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      const l = tidy(() => x.matmul(x).retainGrad().tanh().mean());
      await l.backward();
      l.dispose();
      x.grad = null;
      expect(tf.memory().numTensors).toBe(before);
    }
    x.dispose();
  });
});

describe('a scope left by a throw frees what it made (probe BA)', () => {
  it("tidy whose fn throws disposes the tensors made inside, as tf.tidy (was: leaked each time, a module's typed error caught)", () => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++)
      expect(() =>
        tidy(() => {
          x.mul(2).add(1);
          throw new Error('bad input');
        }),
      ).toThrow('bad input');
    expect(tf.memory().numTensors).toBe(before);
    x.dispose();
  });

  it('checkpoint whose recomputation throws in backward leaves the cloned inputs behind no more', async () => {
    const x = tensor([1, 2, 3, 4], [2, 2], { requiresGrad: true });
    let calls = 0;
    const segment = (h: Tensor) => {
      if (++calls % 2 === 0) throw new Error('recomputation failed');
      return h.tanh().mul(h);
    };
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      const l = tidy(() => checkpoint(segment, x.exp()).sum());
      await expect(l.backward()).rejects.toThrow('recomputation failed');
      l.dispose();
      expect(tf.memory().numTensors).toBe(before);
    }
    x.dispose();
  });
});
