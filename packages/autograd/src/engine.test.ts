import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  AutogradArgumentError,
  AutogradError,
  AutogradFunction,
  backward,
  type Context,
  type FunctionNode,
  GraphFreedError,
  noGrad,
  queueCallback,
  randn,
  type Tensor,
  TensorDisposedError,
  tensor,
  tidy,
} from './index.js';
import { disposeAll } from './test/utils.js';

const values = (t: tf.Tensor | null): number[] => Array.from(t!.dataSync());

describe('engine', () => {
  it('computes gradients with broadcasting and accumulates across backward calls', async () => {
    const a = tensor(
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      undefined,
      { requiresGrad: true },
    );
    const b = tensor([10, 20, 30], undefined, { requiresGrad: true });
    await a.mul(b).add(a).sum().backward();
    expect(values(a.grad)).toEqual([11, 21, 31, 11, 21, 31]);
    expect(values(b.grad)).toEqual([5, 7, 9]);
    await a.mul(b).sum().backward();
    expect(values(b.grad)).toEqual([10, 14, 18]);
    // add hands the same gradient tensor to both inputs, one of which already holds a gradient
    const c = tensor([1, 2, 3], undefined, { requiresGrad: true });
    await b.add(c).add(b).sum().backward();
    expect(values(b.grad)).toEqual([12, 16, 20]);
    expect(values(c.grad)).toEqual([1, 1, 1]);
    c.dispose();
    a.dispose();
    b.dispose();
  });

  it('backward(t) as a function: the gradient optional, a Tensor or a tf.Tensor; unknown options refused', async () => {
    const a = tensor([1, 2, 3], undefined, { requiresGrad: true });
    await backward(a.mul(a).sum());
    expect(values(a.grad)).toEqual([2, 4, 6]);
    const g = tensor([1, 0, 2]);
    await backward(a.mul(2), g);
    expect(values(a.grad)).toEqual([4, 4, 10]);
    await backward(a.mul(2), g.data, { retainGraph: false });
    expect(values(a.grad)).toEqual([6, 4, 14]);
    await expect(backward(a.sum(), undefined, { retain_graph: true } as never)).rejects.toThrow(AutogradArgumentError);
    // probe CP: the options given first were taken for no gradient, and retainGraph was lost
    const l = a.sum();
    await expect(l.backward({ retainGraph: true } as never)).rejects.toThrow(/options go second/);
    expect(values(a.grad)).toEqual([6, 4, 14]);
    disposeAll(a, g, l);
  });

  it('fires post-accumulate hooks in readiness order along a chain, callbacks last', async () => {
    const ws = [0, 1, 2].map((i) => randn([4, 4], { requiresGrad: true, seed: i }));
    const events: string[] = [];
    for (const [i, w] of ws.entries()) {
      w.registerPostAccumulateGradHook((t) => {
        expect(t.grad).not.toBeNull();
        events.push(`w${i}`);
        if (i === 2) queueCallback(() => void events.push('callback'));
      });
    }
    const x = randn([2, 4], { seed: 9 });
    const loss = ws.reduce((h, w) => h.matmul(w).exp().mul(0.1), x).sum();
    await loss.backward();
    expect(events).toEqual(['w2', 'w1', 'w0', 'callback']);
    disposeAll(...ws, x, loss);
  });

  it('fires a parameter used twice once, after both contributions', async () => {
    const w = tensor([2], undefined, { requiresGrad: true });
    const x = tensor([3]);
    const seen: number[] = [];
    w.registerPostAccumulateGradHook((t) => void seen.push(t.grad!.dataSync()[0]));
    // y = (w*x) * w + w: dy/dw = 2wx + 1 = 13, from three uses along different depths
    const loss = w.mul(x).mul(w).add(w).sum();
    await loss.backward();
    expect(seen).toEqual([13]);
    disposeAll(w, x, loss);
  });

  it('lets a tensor hook replace the gradient', async () => {
    const w = tensor([1, 1], undefined, { requiresGrad: true });
    const h = w.mul(3);
    h.registerHook((g) => tf.mul(g, 10));
    w.registerHook((g) => tf.add(g, 1));
    const loss = h.sum();
    await loss.backward();
    expect(values(w.grad)).toEqual([31, 31]);
    disposeAll(w, loss);
  });

  it('awaits an async backward and its queued callbacks', async () => {
    class SlowIdentity extends AutogradFunction {
      forward(_ctx: Context, x: tf.Tensor) {
        return x.clone();
      }
      async backward(_ctx: Context, dy: tf.Tensor) {
        await new Promise((r) => setTimeout(r, 20));
        queueCallback(async () => {
          await new Promise((r) => setTimeout(r, 10));
          order.push('callback');
        });
        order.push('backward');
        return tf.mul(dy, 2);
      }
    }
    const order: string[] = [];
    const w = tensor([1, 2], undefined, { requiresGrad: true });
    const loss = SlowIdentity.apply<Tensor>(w).sum();
    await loss.backward();
    order.push('returned');
    expect(order).toEqual(['backward', 'callback', 'returned']);
    expect(values(w.grad)).toEqual([2, 2]);
    disposeAll(w, loss);
  });

  it('awaits promises returned by post-accumulate hooks before the callbacks', async () => {
    const order: string[] = [];
    const w = tensor([1, 2], undefined, { requiresGrad: true });
    w.registerPostAccumulateGradHook(async () => {
      queueCallback(() => void order.push('callback'));
      await new Promise((r) => setTimeout(r, 20));
      order.push('hook settled');
    });
    const loss = w.mul(w).sum();
    await loss.backward();
    expect(order).toEqual(['hook settled', 'callback']);
    disposeAll(w, loss);
  });

  it('keeps the callbacks of concurrent backwards apart', async () => {
    const order: string[] = [];
    const runOne = async (name: string, delayMs: number) => {
      const w = tensor([1], undefined, { requiresGrad: true });
      w.registerPostAccumulateGradHook(() => {
        queueCallback(async () => {
          await new Promise((r) => setTimeout(r, delayMs));
          order.push(`${name} callback`);
        });
      });
      const loss = w.mul(2).sum();
      await loss.backward();
      order.push(`${name} done`);
      disposeAll(w, loss);
    };
    await Promise.all([runOne('a', 30), runOne('b', 1)]);
    expect(order).toEqual(['b callback', 'b done', 'a callback', 'a done']);
  });

  it('refuses a second backward through a freed graph unless retainGraph', async () => {
    const w = tensor([1, 2], undefined, { requiresGrad: true });
    const h = w.exp();
    const loss = h.sum();
    await loss.backward(undefined, { retainGraph: true });
    await loss.backward();
    expect(values(w.grad).map((v) => Math.round(v * 1000))).toEqual([5437, 14778]);
    await expect(loss.backward()).rejects.toBeInstanceOf(GraphFreedError);
    expect(() => h.data).toThrow(TensorDisposedError);
    expect(loss.item()).toBeCloseTo(Math.E + Math.E ** 2, 4);
    disposeAll(w, loss);
  });

  it('raises typed errors for bad backward calls', async () => {
    const x = tensor([1, 2]);
    const w = tensor([1, 2], undefined, { requiresGrad: true });
    const y = w.mul(2);
    await expect(x.backward()).rejects.toBeInstanceOf(AutogradArgumentError);
    await expect(y.backward()).rejects.toThrow(/only for scalar outputs/);
    const wrongShape = tf.ones([3]);
    await expect(y.backward(wrongShape)).rejects.toThrow(/does not match/);
    expect(() => queueCallback(() => {})).toThrow(AutogradError);
    expect(() => y.registerPostAccumulateGradHook(() => {})).toThrow(AutogradArgumentError);
    expect(() => tensor([1], undefined, { dtype: 'int32', requiresGrad: true })).toThrow(AutogradArgumentError);
    wrongShape.dispose();
    disposeAll(x, w, y);
  });

  it('records nothing under noGrad and tidy disposes what fn does not return', () => {
    const w = tensor([1, 2], undefined, { requiresGrad: true });
    const before = tf.memory().numTensors;
    const y = tidy(() => noGrad(() => w.mul(2).add(1).exp()));
    expect(y.requiresGrad).toBe(false);
    expect(y.gradFn).toBeNull();
    expect(tf.memory().numTensors).toBe(before + 1);
    disposeAll(w, y);
  });

  it('tidy frees the saved tensors of a graph nobody can backward any more', async () => {
    const w = randn([4, 4], { requiresGrad: true, seed: 4 });
    const x = randn([3, 4], { seed: 5 });
    const before = tf.memory().numTensors;
    const score = tidy(() => x.matmul(w).tanh().mean().item());
    expect(Number.isFinite(score)).toBe(true);
    expect(tf.memory().numTensors).toBe(before);
    const kept = tidy(() => x.matmul(w).tanh().mean());
    await kept.backward();
    expect(w.grad).not.toBeNull();
    disposeAll(w, x, kept);
  });

  // probe BS: an async forward under tidy (a root's forward replaced after fullyShard) leaked what it made first
  it('tidy of an async function: a TypeError saying so, and what it made before its first await freed', async () => {
    const x = randn([3, 4], { seed: 5 });
    const before = tf.memory().numTensors;
    const asyncForward = async () => {
      const y = x.mul(2).exp();
      await Promise.resolve();
      return y;
    };
    expect(() => tidy(asyncForward)).toThrow(/tidy\(\) takes a synchronous function.*returned a Promise/);
    await new Promise((r) => setTimeout(r, 0)); // the floating promise settles (its rejection is caught)
    expect(tf.memory().numTensors).toBe(before);
    disposeAll(x);
  });

  it('frees a graph when its last tensor is disposed, backwarded or not', async () => {
    const w = randn([4, 4], { requiresGrad: true, seed: 4 });
    const x = randn([3, 4], { seed: 5 });
    const before = tf.memory().numTensors;
    const m = x.matmul(w);
    const h = m.tanh();
    const loss = h.exp().mean();
    disposeAll(m, h); // loss's graph still holds what its backward would need
    expect(tf.memory().numTensors).toBeGreaterThan(before + 1);
    const [e] = (loss.gradFn!.next[0]!.node as FunctionNode).outputs;
    loss.dispose();
    // h.exp(), never disposed, is still the caller's, and could still be backwarded
    expect(e.gradFn!.freed).toBe(false);
    e.dispose();
    expect(tf.memory().numTensors).toBe(before);
    const kept = tidy(() => x.matmul(w).sigmoid().sum());
    await kept.backward(undefined, { retainGraph: true });
    kept.dispose();
    w.grad = null;
    expect(tf.memory().numTensors).toBe(before);
    disposeAll(w, x);
  });

  it('keeps grad mode per async flow', async () => {
    const w = tensor([1], undefined, { requiresGrad: true });
    let insideNoGrad: Tensor | null = null;
    const evaluation = noGrad(async () => {
      await new Promise((r) => setTimeout(r, 10));
      insideNoGrad = w.mul(2);
    });
    const recorded = w.mul(3); // runs while the noGrad body is pending
    await evaluation;
    expect(recorded.requiresGrad).toBe(true);
    expect(insideNoGrad!.requiresGrad).toBe(false);
    disposeAll(w, recorded, insideNoGrad!);
  });

  it.each([true, false])('keeps numTensors flat across training steps (forward in tidy: %s)', async (useTidy) => {
    const w = randn([3, 3], { requiresGrad: true, seed: 1 });
    const x = randn([5, 3], { seed: 2 });
    const forward = () =>
      x
        .matmul(w)
        .exp()
        .mean()
        .sub(w.sum({ dim: 0 }).mean());
    const step = async () => {
      const loss = useTidy ? tidy(forward) : forward();
      await loss.backward();
      loss.dispose();
      w.data = tf.tidy(() => tf.sub(w.data, tf.mul(w.grad!, 0.1)));
      w.grad = null;
    };
    await step();
    const before = tf.memory().numTensors;
    for (let i = 0; i < 5; i++) await step();
    expect(tf.memory().numTensors).toBe(before);
    disposeAll(w, x);
  });
});

describe('a freed tensor (an FSDP parameter between gathers)', () => {
  it('refuses a write to its data (was: kept until the next gather overwrote it); restore brings it back', () => {
    const t = tensor([1, 1], [2], { requiresGrad: true });
    t.free('resharded: step over the shards');
    expect(() => {
      t.data = tf.zeros([2]);
    }).toThrow(/resharded: step over the shards/);
    expect(t.freedBy).toBe('resharded: step over the shards');
    t.restore(tf.fill([2], 7));
    expect([t.freedBy, Array.from(t.dataSync())]).toEqual([null, [7, 7]]);
    t.dispose();
  });

  // FSDP's resharded parameters: torch's DTensor keeps its global shape, and optimizer groups pick by ndim
  it('freed with keepShape, shape, rank and size still answer; data does not; restore or dispose ends it', () => {
    const t = tensor([1, 2, 3, 4, 5, 6], [2, 3], { requiresGrad: true });
    t.free('resharded', { keepShape: true });
    expect([t.shape, t.rank, t.size]).toEqual([[2, 3], 2, 6]);
    expect(() => t.data).toThrow(/resharded/);
    t.restore(tf.zeros([3]));
    expect(t.shape).toEqual([3]);
    t.free('freed by backward()');
    expect(() => t.shape).toThrow(/freed by backward/);
    t.dispose();
  });
});
