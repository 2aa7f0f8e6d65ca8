import { tf } from '@ddp/tensor';
import { expectNoLeaks } from '@ddp/tensor/testing';
import { describe, expect, it } from 'vitest';
import { Parameter } from '../parameter.js';
import { type GoldenTensor, loadFixture, maxAbsDiff } from '../test/fixtures.js';
import { Adam, AdamW } from './adam.js';
import { clipGradNorm } from './clip-grad.js';
import { type Optimizer, OptimizerError } from './optimizer.js';
import { SGD } from './sgd.js';

interface OptimGolden {
  inputs: { param: GoldenTensor; grads: number[][] };
  outputs: { params_after: number[][] };
}

const cases: [string, (p: Parameter[]) => Optimizer<{ lr: number }>][] = [
  ['optim_sgd_momentum_nesterov', (p) => new SGD(p, { lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 1e-2 })],
  ['optim_adam_l2', (p) => new Adam(p, { lr: 1e-2, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.1 })],
  ['optim_adamw', (p) => new AdamW(p, { lr: 1e-2, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.1 })],
];

describe('optimizers against PyTorch trajectories', () => {
  for (const [name, make] of cases) {
    it(`${name} within 1e-5 over 4 steps, then resumes from its state dict`, async () => {
      const g = loadFixture<OptimGolden>(name);
      const p = new Parameter(tf.tensor(g.inputs.param.data, g.inputs.param.shape));
      const opt = make([p]);
      const stepWith = (o: Optimizer<{ lr: number }>, q: Parameter, k: number) => {
        q.grad = tf.tensor(g.inputs.grads[k] as number[]);
        o.step();
      };
      for (let k = 0; k < 2; k++) {
        stepWith(opt, p, k);
        expect(maxAbsDiff(p.dataSync(), g.outputs.params_after[k] as number[])).toBeLessThan(1e-5);
      }
      // A fresh optimizer loaded from the state dict continues the same trajectory.
      const q = new Parameter(p.data.clone());
      const resumed = make([q]);
      resumed.loadStateDict(opt.stateDict());
      // its own state dict (borrowed tensors): before, the load freed them first, raised, and the moments restarted
      opt.loadStateDict(opt.stateDict());
      await expectNoLeaks(() => stepWith(opt, p, 2), { label: `${name} step` });
      for (let k = 2; k < 4; k++) {
        if (k === 3) stepWith(opt, p, k);
        stepWith(resumed, q, k);
        expect(maxAbsDiff(p.dataSync(), g.outputs.params_after[k] as number[])).toBeLessThan(1e-5);
        expect(Array.from(q.dataSync())).toEqual(Array.from(p.dataSync()));
      }
      for (const o of [opt, resumed]) o.dispose();
      tf.dispose([p, q].flatMap((t) => [t.data, ...(t.grad ? [t.grad] : [])]));
    });
  }

  it('refuses a state dict whose tensors were freed with their optimizer, changing nothing', () => {
    const p = new Parameter(tf.ones([2]));
    const old = new Adam([p], { lr: 0.1 });
    p.grad = tf.ones([2]);
    old.step();
    const kept = old.stateDict();
    old.dispose();
    const opt = new Adam([p], { lr: 0.1 });
    opt.step();
    // before: a plain "Tensor is disposed" Error, thrown after the optimizer's own state was freed
    expect(() => opt.loadStateDict(kept)).toThrow(/state 'expAvg' of parameter 0 was freed: stateDict\(\) lends/);
    expect(opt.state.get(p)?.step).toBe(1);
    opt.dispose();
    tf.dispose([p.data, p.grad]);
  });

  it('applies per-group hyperparameters', () => {
    const a = new Parameter(tf.ones([2]));
    const b = new Parameter(tf.ones([2]));
    const opt = new SGD([{ params: [a] }, { params: [b], lr: 0.5 }], { lr: 0.1 });
    a.grad = tf.ones([2]);
    b.grad = tf.ones([2]);
    opt.step();
    expect(Array.from(a.dataSync())).toEqual([0.9, 0.9].map(Math.fround));
    expect(Array.from(b.dataSync())).toEqual([0.5, 0.5]);
    expect(opt.stateDict().paramGroups.map((g) => [g.lr, g.params])).toEqual([
      [0.1, [0]],
      [0.5, [1]],
    ]);
    expect(() => new SGD([{ params: [a] }, { params: [a] }], { lr: 1 })).toThrow(/more than one/);
    // twice in one group (a tied weight listed under both names): step() would apply two updates
    expect(() => new SGD([a, b, a], { lr: 1 })).toThrow(/parameter 2 of the group is already in it/);
    const c = new Parameter(tf.ones([1]));
    expect(() => opt.addParamGroup({ params: [c, c] })).toThrow(OptimizerError);
    expect(opt.paramGroups).toHaveLength(2);
    c.dispose();
    a.dispose();
    b.dispose();
  });
});

describe('clipGradNorm', () => {
  it('scales all gradients by maxNorm / total when above it', () => {
    const a = new Parameter(tf.zeros([2]));
    const b = new Parameter(tf.zeros([1]));
    a.grad = tf.tensor([3, 0]);
    b.grad = tf.tensor([4]);
    expect(clipGradNorm([a, b], 1)).toBeCloseTo(5, 5);
    expect(Array.from(a.grad.dataSync())[0]).toBeCloseTo(0.6, 5);
    expect(Array.from((b.grad as tf.Tensor).dataSync())[0]).toBeCloseTo(0.8, 5);
    expect(clipGradNorm([a, b], 10)).toBeCloseTo(1, 5);
    expect(Array.from((b.grad as tf.Tensor).dataSync())[0]).toBeCloseTo(0.8, 5);
    expect(clipGradNorm([a, b], 1, Number.POSITIVE_INFINITY)).toBeCloseTo(0.8, 5);
    a.dispose();
    b.dispose();
  });

  it("makes every gradient NaN when the norm is NaN, and clips by an infinite norm to 0, as torch's", () => {
    const values = (p: Parameter) => Array.from((p.grad as tf.Tensor).dataSync());
    const nan = Number.NaN;
    const a = new Parameter(tf.zeros([2]));
    const b = new Parameter(tf.zeros([3]));
    a.grad = tf.tensor([3, nan]);
    b.grad = tf.tensor([1, 2, -2]);
    // torch 1.13: nan, a.grad [nan, nan], b.grad [nan, nan, nan] (was: b stepped unclipped)
    expect(clipGradNorm([a, b], 1)).toBeNaN();
    expect([values(a), values(b)]).toEqual([
      [nan, nan],
      [nan, nan, nan],
    ]);
    a.grad = tf.tensor([3, Number.POSITIVE_INFINITY]);
    b.grad = tf.tensor([1, 2, -2]);
    // torch 1.13: inf, a.grad [0, nan], b.grad [0, 0, -0]
    expect(clipGradNorm([a, b], 1)).toBe(Number.POSITIVE_INFINITY);
    expect([values(a), values(b)]).toEqual([
      [0, nan],
      [0, 0, -0],
    ]);
    a.dispose();
    b.dispose();
  });

  it('counts and scales a parameter listed twice once (a tied weight in two modules)', () => {
    const tied = new Parameter(tf.zeros([2]));
    const other = new Parameter(tf.zeros([1]));
    tied.grad = tf.tensor([3, 0]);
    other.grad = tf.tensor([4]);
    // was: norm sqrt(9 + 9 + 16) = 5.83 and the tied gradient scaled twice, to 3 · (1/5.83)²
    expect(clipGradNorm([tied, other, tied], 1)).toBeCloseTo(5, 5);
    expect(Array.from(tied.grad.dataSync())[0]).toBeCloseTo(0.6, 5);
    tied.dispose();
    other.dispose();
  });
});
