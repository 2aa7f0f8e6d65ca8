import { checkpoint, fromTf, type Tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator, manualSeed } from '../generator.js';
import type { Module } from '../module.js';
import { Dropout } from './activation.js';
import { Sequential } from './container.js';
import { Linear } from './linear.js';
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
