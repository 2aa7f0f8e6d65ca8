import { getBackend, tf, useNativeKernels } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  batchNormStats,
  checkpoint,
  concat,
  conv2d,
  crossEntropy,
  dropout,
  embedding,
  gelu,
  indexSelect,
  l2Normalize,
  layerNorm,
  linear,
  logSigmoid,
  logSoftmax,
  manualSeed,
  maskedFill,
  maxPool2d,
  mse,
  narrow,
  pad,
  rand,
  randn,
  relu,
  sigmoid,
  slice,
  softmax,
  split,
  type Tensor,
  tanh,
  tensor,
  where,
} from '../index.js';
import { expectGradsMatch as check, disposeAll, expectAllClose, leaf, randomShape } from '../test/utils.js';

describe('activations and softmax: finite-difference gradients on random shapes', () => {
  for (let trial = 0; trial < 2; trial++) {
    it(`trial ${trial}`, async () => {
      const s = randomShape(2, 2, 4);
      await check((x) => tanh(x), [leaf(s)]);
      await check((x) => sigmoid(x), [leaf(s)]);
      await check((x) => relu(x), [leaf(s)], { eps: 1e-3 });
      await check((x) => gelu(x), [leaf(s)]);
      await check((x) => gelu(x, { approximate: 'tanh' }), [leaf(s)]);
      await check((x) => logSigmoid(x), [leaf(s)]);
      await check((x) => softmax(x, 0), [leaf(s)]);
      await check((x) => softmax(x), [leaf([...s, 3])]);
      await check((x) => logSoftmax(x, 1), [leaf([...s, 2])]);
    });
  }
});

describe('relu gradient', () => {
  it("is 0 at and below 0, dy above and at NaN (torch's: NaN's output does not compare <= 0)", async () => {
    const x = tensor([-1, 0, -0, 2, Number.NaN], [5], { requiresGrad: true });
    const y = relu(x);
    await y.backward(tf.tensor([3, 3, 3, 3, 3]));
    expect(Array.from(x.grad!.dataSync())).toEqual([0, 0, 0, 3, 3]);
    disposeAll(x, y);
  });
});

/** conv2d (bias inside) → relu → sum for 3 steps: the output and gradients of the last, and tensors left per step. */
async function convReluSteps(): Promise<{ values: number[][]; leftPerStep: number[] }> {
  const x = randn([3, 4, 6, 5], { seed: 1, requiresGrad: true });
  const w = randn([5, 4, 3, 3], { seed: 2, requiresGrad: true });
  const b = randn([5], { seed: 3, requiresGrad: true });
  const dy = tf.ones([3, 5, 6, 5]);
  const leftPerStep: number[] = [];
  let values: number[][] = [];
  for (let step = 0; step < 3; step++) {
    const before = tf.memory().numTensors;
    const y = relu(conv2d(x, w, b, { padding: 1 }));
    await y.backward(dy);
    values = [y.data, x.grad!, w.grad!, b.grad!].map((t) => Array.from(t.dataSync()));
    for (const t of [x, w, b]) t.grad = null;
    y.dispose();
    leftPerStep.push(tf.memory().numTensors - before);
  }
  disposeAll(x, w, b, dy);
  return { values, leftPerStep };
}

describe.skipIf(getBackend() !== 'wasm')('conv2d with bias and relu on wasm', () => {
  it("native kernels (bias add, channel sum, relu gradient) give tfjs-wasm ops' values; nothing left per step", async () => {
    const initial = useNativeKernels(false);
    try {
      const tfjs = await convReluSteps();
      if (!useNativeKernels(true)) return; // addon not built: nothing native to compare
      const native = await convReluSteps();
      expect([tfjs.leftPerStep, native.leftPerStep]).toEqual([
        [0, 0, 0],
        [0, 0, 0],
      ]);
      native.values.forEach((v, i) => {
        expectAllClose(v, tfjs.values[i], 4);
      });
    } finally {
      useNativeKernels(initial);
    }
  });
});

describe('indexing ops: finite-difference gradients', () => {
  it('concat, split (several outputs), slice, narrow, pad', async () => {
    const [a, b, c] = randomShape(3, 2, 4) as [number, number, number];
    await check((x, y) => concat([x, y, x], 1), [leaf([a, b]), leaf([a, c])]);
    await check(
      (x) => {
        const [p, q] = split(x, [1, b], 1) as [Tensor, Tensor];
        return q.mul(p);
      },
      [leaf([a, b + 1])],
    );
    await check((x) => split(x, 2, 0)[1].exp(), [leaf([4, c])]);
    await check((x) => slice(x, [1, 0, 1], [a - 1, -1, 1]), [leaf([a, b, c])]);
    await check((x) => narrow(x, -1, 1, c - 1), [leaf([a, c])]);
    await check(
      (x) =>
        pad(
          x,
          [
            [1, 0],
            [2, 1],
          ],
          3,
        ).square(),
      [leaf([a, b])],
    );
  });

  it('indexSelect with repeats, embedding, where and maskedFill with broadcasting', async () => {
    await check((x) => indexSelect(x, 1, [2, 0, 2, 1]), [leaf([2, 3, 2])]);
    await check(
      (t) =>
        embedding(
          [
            [1, 4, 1],
            [0, 0, 3],
          ],
          t,
        ),
      [leaf([5, 3])],
    );
    const cond = tf.tensor([[true, false, true]]);
    await check((x, y) => where(cond, x, y), [leaf([2, 3]), leaf([2, 1])]);
    await check((x) => maskedFill(x, cond, -2).exp(), [leaf([4, 3])]);
    cond.dispose();
  });
});

describe('conv, pool, norms, losses, dropout: finite-difference gradients', () => {
  it('conv2d with stride and padding, maxPool2d', async () => {
    const [n, c] = randomShape(2, 1, 2) as [number, number];
    await check(
      (x, w, b) => conv2d(x, w, b, { stride: 2, padding: 1 }),
      [leaf([n, c, 5, 4]), leaf([3, c, 3, 2]), leaf([3])],
    );
    await check(
      (x, w) => conv2d(x, w, null, { stride: [1, 2], padding: [0, 1] }),
      [leaf([n, c, 4, 4]), leaf([2, c, 2, 2])],
    );
    await check((x) => maxPool2d(x, 2), [leaf([n, c, 4, 6])], { eps: 1e-3 });
    await check((x) => maxPool2d(x, 3, { stride: 1 }), [leaf([1, c, 4, 4])], { eps: 1e-3 });
  });

  it('layerNorm, batchNormStats, l2Normalize, linear', async () => {
    const s = randomShape(2, 2, 4);
    await check((x, w, b) => layerNorm(x, w, b), [leaf([...s, 5]), leaf([5]), leaf([5])]);
    await check((x, w) => layerNorm(x, w), [leaf([2, 3, 4]), leaf([3, 4])]);
    await check((x) => layerNorm(x, null, null, { normalizedDims: 2 }), [leaf([2, 3, 4])]);
    await check(
      (x) => {
        const { mean, var: v } = batchNormStats(x, [0, 2]);
        return mean.mul(v.add(1));
      },
      [leaf([3, 2, 4])],
    );
    await check((x) => l2Normalize(x, 1), [leaf([...s, 3])]);
    await check((x, w, b) => linear(x, w, b), [leaf([...s, 3]), leaf([2, 3]), leaf([2])]);
    await check((x, w) => linear(x, w), [leaf([2, 3, 4]), leaf([5, 4])]);
    await check((x, w, b) => linear(x, w, b), [leaf([4]), leaf([3, 4]), leaf([3])]);
  });

  it('crossEntropy (ignoreIndex, reductions), mse, dropout (seeded)', async () => {
    await check((x) => crossEntropy(x, [2, -100, 0, 1]), [leaf([4, 3])]);
    await check((x) => crossEntropy(x, [2, 5, 0], { ignoreIndex: 5, reduction: 'sum' }), [leaf([3, 6])]);
    await check((x) => crossEntropy(x, [1, 0], { reduction: 'none' }), [leaf([2, 3])]);
    await check((x) => crossEntropy(x, [1, -100, 2], { reduction: 'none' }), [leaf([3, 3])]);
    await check((x, y) => mse(x, y), [leaf([3, 4]), leaf([3, 4])]);
    await check((x) => dropout(x, 0.4, { seed: 7 }), [leaf([5, 6])]);
  });

  it('checkpoint matches the plain segment', async () => {
    const w = leaf([3, 3]);
    const segment = (x: Tensor) => gelu(linear(x, w)).mul(x);
    await check((x) => checkpoint(segment, x), [leaf([2, 3])]);
    await check((x) => checkpoint((a, b) => a.mul(b).tanh(), x, w), [leaf([3, 3])]);
    // inputs without grad: the segment's parameters must still get theirs
    const data = randn([2, 3], { seed: 3 });
    await check((v) => checkpoint(segment, data).mul(v), [leaf([2, 3])]);
    w.grad = null;
    const loss = checkpoint(segment, data).sum();
    await loss.backward();
    expect(w.grad).not.toBeNull();
    disposeAll(data, loss);
    w.dispose();
  });
});

describe('op details', () => {
  it.each([
    ['dropout masks', (a: Tensor) => dropout(a.exp(), 0.5).tanh()],
    [
      'randn and rand noise',
      (a: Tensor) =>
        a
          .mul(randn([6, 6]))
          .add(rand([6, 6]))
          .relu(),
    ],
  ])('checkpoint replays unseeded %s when it recomputes', async (_, segment) => {
    const x = leaf([6, 6]);
    const grads: number[][] = [];
    for (const wrap of [false, true]) {
      manualSeed(42);
      const y = wrap ? checkpoint(segment, x) : segment(x);
      dropout(x, 0.5).dispose(); // draws from the stream between forward and backward
      const loss = y.sum();
      await loss.backward();
      grads.push(Array.from(x.grad!.dataSync()));
      disposeAll(y, loss);
      x.grad = null;
    }
    expect(grads[1]).toEqual(grads[0]);
    expect(grads[0].filter((g) => g === 0).length).toBeGreaterThan(5);
    x.dispose();
  });

  it('dropout zeroes about p of the values, scales the rest, and is the identity in eval', () => {
    const x = tensor(Array(4000).fill(1), [4000]);
    const y = dropout(x, 0.25);
    const v = y.dataSync();
    const zeros = v.filter((e) => e === 0).length;
    expect(zeros).toBeGreaterThan(850);
    expect(zeros).toBeLessThan(1150);
    expect(v.every((e) => e === 0 || Math.abs(e - 4 / 3) < 1e-6)).toBe(true);
    const z = dropout(x, 0.25, { training: false });
    expect(Array.from(z.dataSync()).every((e) => e === 1)).toBe(true);
    disposeAll(x, y, z);
  });

  it('crossEntropy ignores labels equal to ignoreIndex in the mean', () => {
    const logits = tensor([
      [0, Math.log(3)],
      [5, -5],
    ]);
    const l = crossEntropy(logits, [1, -100]);
    expect(l.item()).toBeCloseTo(-Math.log(0.75), 5);
    disposeAll(logits, l);
  });
});

describe('fused nodes', () => {
  it('linear, layerNorm, gelu, softmax and crossEntropy are one graph node each, straight onto the leaves', () => {
    const [x, w, b] = [leaf([4, 3]), leaf([2, 3]), leaf([2])];
    const [g, beta] = [leaf([3]), leaf([3])];
    const outs: [string, Tensor][] = [
      ['Linear', linear(x, w, b)],
      ['LayerNorm', layerNorm(x, g, beta)],
      ['GeluErf', gelu(x)],
      ['Softmax', softmax(x)],
      ['CrossEntropy', crossEntropy(x, [0, 2, 1, -100])],
    ];
    for (const [name, y] of outs) {
      expect(y.gradFn?.name).toBe(name);
      const inputs = y.gradFn!.next.filter((e) => e !== null).map((e) => e.node.name);
      expect(
        inputs.every((n) => n === 'AccumulateGrad'),
        `${name} feeds ${inputs}`,
      ).toBe(true);
    }
    disposeAll(x, w, b, g, beta, ...outs.map(([, y]) => y));
  });
});
