import { add, checkpoint, fromTf, mul, sum, type Tensor, tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator, manualSeed } from '../generator.js';
import type { Module } from '../module.js';
import { Dropout } from './activation.js';
import { Sequential } from './container.js';
import { Linear } from './linear.js';
import { BatchNorm1d } from './norm.js';
import { TransformerBlock } from './transformer.js';

const values = (t: tf.Tensor | null | undefined) => Array.from((t as tf.Tensor).dataSync());

/** Output, input gradient and parameter gradients of `model` on x, checkpointed or not. */
async function run(model: Module & { forward(x: Tensor): Tensor }, x: tf.Tensor, checkpointed: boolean) {
  const input = fromTf(x.clone(), { requiresGrad: true });
  const body = (h: Tensor) => model.forward(h);
  const y = tidy(() => (checkpointed ? checkpoint(body, input) : body(input)));
  await y.backward(tf.onesLike(y.data));
  const got = {
    y: values(y.data),
    dx: values(input.grad),
    grads: model.parameters().map((p) => values(p.grad)),
  };
  model.zeroGrad();
  y.dispose();
  input.dispose();
  return got;
}

describe('activation checkpointing with dropout layers', () => {
  const cases: [string, (generator: Generator) => Module & { forward(x: Tensor): Tensor }, number[]][] = [
    [
      'Dropout',
      (g) => new Sequential(new Linear(16, 16, { generator: g }), new Dropout(0.5, { generator: g })),
      [3, 16],
    ],
    [
      'TransformerBlock (attention and residual dropout)',
      (g) => new TransformerBlock(8, 2, { dropout: 0.3, generator: g }),
      [2, 5, 8],
    ],
  ];
  for (const [name, build, shape] of cases) {
    for (const generator of ['default', 'own'] as const) {
      it(`recomputes the forward's masks: ${name}, ${generator} generator`, async () => {
        const g = generator === 'default' ? manualSeed(7) : new Generator(7);
        const model = build(g);
        const x = tf.randomNormal(shape, 0, 1, 'float32', 3);
        const start = g.getState();
        const plain = await run(model, x, false);
        const after = g.getState();
        g.setState(start);
        const recomputed = await run(model, x, true);
        // the same masks in forward and recomputation: torch's preserve_rng_state
        expect(recomputed).toEqual(plain);
        expect(g.getState()).toEqual(after);
        x.dispose();
      });
    }
  }
});

// probe CP: the running statistics a BatchNorm wrote inside a checkpointed forward were freed with that
// forward's tf.tidy (stateDict() raised, a second segment crashed); torch 1.13 updates them twice per segment
it('a BatchNorm in two checkpointed segments: gradients and running statistics as torch 1.13', async () => {
  const bn = new BatchNorm1d(2);
  const data = [0, 1].map((k) =>
    Array.from({ length: 8 }, (_, i) => (k ? Math.cos(i * 0.9) * 3 - 2 : Math.sin(i * 1.3) * 2 + 1)),
  );
  const [x1, x2] = data.map((d) => tensor(d, [4, 2], { requiresGrad: true }));
  const loss = tidy(() => {
    const segment = (a: Tensor) => bn.forward(a).tanh();
    const both = add(checkpoint(segment, x1), checkpoint(segment, x2));
    return sum(mul(both, tensor([1, 2, 3, 4, 5, 6, 7, 8], [4, 2])));
  });
  expect(bn.runningMean.isDisposed).toBe(false);
  await loss.backward();
  const close = (got: tf.Tensor | null, want: number[]) =>
    Array.from(got!.dataSync()).forEach((v, i) => {
      expect(v).toBeCloseTo(want[i], 5);
    });
  close(x1.grad, [-0.36155, -3.07142, 0.340934, -2.164263, 0.104321, 1.920676, -0.083705, 3.315007]);
  close(bn.runningMean.data, [-0.049084, -0.034103]);
  close(bn.runningVar.data, [2.229461, 2.095769]);
  expect(bn.stateDict().get('num_batches_tracked')!.dataSync()[0]).toBe(4);
  for (const t of [x1, x2, loss]) t.dispose();
  bn.dispose();
});
