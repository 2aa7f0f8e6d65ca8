import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { allReduce, mul, sum, tensor } from './index.js';
import { caseInput, cases, caseWeights, runCases } from './test/collective-cases.js';
import { fakeWorld } from './test/fake-process-group.js';
import { disposeAll, expectAllClose } from './test/utils.js';

const N = 3;

describe('differentiable collectives on a fake 3-rank group', () => {
  it('match a single-process run: each rank backwards its own loss, gradients are those of the summed losses', async () => {
    const before = tf.memory().numTensors;
    const perRank = await Promise.all(fakeWorld(N).map((g) => runCases(g)));
    for (const [name, c] of Object.entries(cases)) {
      const xs = [...Array(N).keys()].map((r) => caseInput(c, r, N));
      const losses = xs.map((_, r) => {
        const y = c.reference(xs, r);
        const weights = caseWeights(y, r);
        const loss = sum(mul(y, weights));
        disposeAll(y, weights);
        return loss;
      });
      const total = losses.reduce((a, b) => a.add(b));
      await total.backward();
      for (const [r, x] of xs.entries()) {
        expectAllClose(perRank[r][name], x.grad?.dataSync() ?? new Float32Array(x.size), 4);
      }
      disposeAll(...xs, ...losses, total);
    }
    expect(tf.memory().numTensors).toBe(before);
  });

  it("refuses a reduce op other than 'sum' or 'avg' (before, 'max' reduced, and backward took it for a sum)", () => {
    const [g] = fakeWorld(1);
    const x = tensor([1, 2], undefined, { requiresGrad: true });
    expect(() => allReduce(x, g as never, { op: 'max' as 'sum' })).toThrow(
      /allReduce: op must be one of 'sum', 'avg', got "max"/,
    );
    x.dispose();
  });
});
