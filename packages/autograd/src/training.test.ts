import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { type Model, mlp, sgdStep, transformer } from './test/models.js';

/** Trains for `steps` SGD steps; returns the first and last loss and numTensors after steps 10 and last. */
async function train(model: Model, steps: number, lr: number) {
  const losses: number[] = [];
  const numTensors: Record<number, number> = {};
  for (let step = 1; step <= steps; step++) {
    const loss = model.loss();
    await loss.backward();
    losses.push(loss.item());
    loss.dispose();
    sgdStep(model.params, lr);
    if (step === 10 || step === steps) numTensors[step] = tf.memory().numTensors;
  }
  return { first: losses[0], last: losses[losses.length - 1], numTensors };
}

describe('training keeps tf.memory().numTensors flat', () => {
  it.each([
    ['3-layer MLP', mlp],
    ['2-block causal transformer', transformer],
  ])('%s, 200 steps', async (_name, build) => {
    const model = build();
    const r = await train(model, 200, 0.1);
    expect(r.numTensors[200]).toBe(r.numTensors[10]);
    expect(r.last).toBeLessThan(r.first * 0.5);
    model.dispose();
  });
});
