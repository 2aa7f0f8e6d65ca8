import { fromTf, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Generator } from './generator.js';
import { Tanh } from './layers/activation.js';
import { Sequential } from './layers/container.js';
import { Linear } from './layers/linear.js';
import { mse } from './losses.js';
import { SGD } from './optim/sgd.js';
import { type GoldenTensor, goldenToTf, loadFixture, maxAbsDiff } from './test/fixtures.js';

interface MlpGolden {
  inputs: Record<'W1' | 'b1' | 'W2' | 'b2' | 'X' | 'Y', GoldenTensor>;
  outputs: { weights_after_step: Record<'W1' | 'b1' | 'W2' | 'b2', GoldenTensor>[] };
}

const golden = loadFixture<MlpGolden>('mlp_sgd_3steps');
const KEYS = { W1: '0.weight', b1: '0.bias', W2: '2.weight', b2: '2.bias' } as const;

function buildModel(): Sequential {
  const model = new Sequential(
    new Linear(5, 8, { generator: new Generator(0) }),
    new Tanh(),
    new Linear(8, 3, { generator: new Generator(1) }),
  );
  const state = Object.fromEntries(
    Object.entries(KEYS).map(([g, k]) => [k, goldenToTf(golden.inputs[g as keyof typeof KEYS])]),
  );
  model.loadStateDict(state);
  tf.dispose(Object.values(state));
  return model;
}

/** Rows [from, to) of batch `step` as autograd tensors (no grad). */
function batch(step: number, from = 0, to = 12) {
  return tf.tidy(() => {
    const x = tf.reshape(tf.slice(goldenToTf(golden.inputs.X), [step, from, 0], [1, to - from, 5]), [to - from, 5]);
    const y = tf.reshape(tf.slice(goldenToTf(golden.inputs.Y), [step, from, 0], [1, to - from, 3]), [to - from, 3]);
    return [x, y] as const;
  });
}

describe('a 2-layer MLP with SGD reproduces PyTorch', () => {
  it('mlp_sgd_3steps within 1e-5, with numTensors flat across steps', async () => {
    const model = buildModel();
    const opt = new SGD(model.parameters(), { lr: 0.1 });
    const counts: number[] = [];
    for (let step = 0; step < 3; step++) {
      const [xs, ys] = batch(step);
      const x = fromTf(xs);
      const y = fromTf(ys);
      const loss = tidy(() => mse(model.forward(x), y));
      await loss.backward();
      loss.dispose();
      x.dispose();
      y.dispose();
      opt.step();
      opt.zeroGrad();
      counts.push(tf.memory().numTensors);
      const sd = model.stateDict();
      for (const [g, k] of Object.entries(KEYS)) {
        const want = golden.outputs.weights_after_step[step]?.[g as keyof typeof KEYS] as GoldenTensor;
        expect(maxAbsDiff((sd.get(k) as tf.Tensor).dataSync(), want.data), `${k} after step ${step}`).toBeLessThan(
          1e-5,
        );
      }
    }
    expect(counts[2]).toBe(counts[1]);
    opt.dispose();
    model.dispose();
  });

  it('accumulating gradients over 4 micro-batches then stepping equals one step on the whole batch', async () => {
    const run = async (chunks: number) => {
      const model = buildModel();
      const opt = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
      for (let step = 0; step < 2; step++) {
        const size = 12 / chunks;
        for (let c = 0; c < chunks; c++) {
          const [xs, ys] = batch(step, c * size, (c + 1) * size);
          const x = fromTf(xs);
          const y = fromTf(ys);
          // Each micro-batch's mean loss is scaled by 1/chunks so the summed gradients equal the full batch's mean.
          const loss = tidy(() => mse(model.forward(x), y).div(chunks));
          await loss.backward();
          for (const t of [loss, x, y]) t.dispose();
        }
        opt.step();
        opt.zeroGrad();
      }
      const weights = [...model.stateDict()].map(([k, t]) => [k, Array.from(t.dataSync())] as const);
      opt.dispose();
      model.dispose();
      return weights;
    };
    const whole = await run(1);
    const accumulated = await run(4);
    for (const [i, [k, w]] of whole.entries()) {
      expect(maxAbsDiff(w, accumulated[i]?.[1] ?? []), k).toBeLessThan(1e-5);
      const initial = golden.inputs[Object.entries(KEYS).find(([, key]) => key === k)?.[0] as keyof typeof KEYS].data;
      expect(maxAbsDiff(w, initial), `${k} moved`).toBeGreaterThan(1e-3);
    }
  });
});
