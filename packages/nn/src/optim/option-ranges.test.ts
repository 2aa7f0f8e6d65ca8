import { tensor, tidy } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Dropout } from '../layers/activation.js';
import { Linear } from '../layers/linear.js';
import { ModuleError } from '../module.js';
import { Adam, AdamW } from './adam.js';
import { OptimizerError } from './optimizer.js';
import { SGD } from './sgd.js';

const params = () => new Linear(2, 1).parameters();

// torch 1.13 raises ValueError for each of these; ddp accepted them and trained away from the minimum.
describe('options torch refuses', () => {
  it('SGD: a negative momentum or weight decay', () => {
    expect(() => new SGD(params(), { lr: 0.1, momentum: -1 })).toThrow(/SGD: invalid momentum -1/);
    expect(() => new SGD(params(), { lr: 0.1, weightDecay: -1e-4 })).toThrow(OptimizerError);
    expect(() => new SGD(params(), { lr: 0.1, momentum: 0.9, weightDecay: 1e-4 })).not.toThrow();
  });

  it('Adam and AdamW: a negative weight decay, an eps that is not >= 0', () => {
    expect(() => new Adam(params(), { weightDecay: -0.1 })).toThrow(/Adam: invalid weightDecay -0\.1/);
    expect(() => new AdamW(params(), { weightDecay: -0.1 })).toThrow(OptimizerError);
    expect(() => new Adam(params(), { eps: Number.NaN })).toThrow(OptimizerError);
  });

  it("a group's value left undefined takes the optimizer's; a group's invalid value or unknown name is refused, also added later", () => {
    const cfg: { headLr?: number; wd?: number } = {};
    const [a, b] = params();
    // before: the spread put undefined over the default, and a step made the weights NaN
    const adamw = new AdamW([{ params: [a] }, { params: [b], weightDecay: cfg.wd, lr: cfg.headLr }], { lr: 0.1 });
    expect([adamw.paramGroups[1].weightDecay, adamw.paramGroups[1].lr]).toEqual([1e-2, 0.1]);
    b.grad = tf.onesLike(b.data);
    adamw.step();
    expect(Array.from(b.dataSync()).every(Number.isFinite)).toBe(true);
    expect(new SGD([{ params: [a], lr: cfg.headLr }], { lr: 0.1 }).paramGroups[0].lr).toBe(0.1);
    expect(() => new Adam([{ params: [a], eps: -1 }], {})).toThrow(/Adam parameter group 0: invalid eps -1/);
    expect(() => new SGD([{ params: [a] }, { params: [b], momentum: -1 }], { lr: 0.1 })).toThrow(
      /SGD parameter group 1: invalid momentum -1/,
    );
    const sgd = new SGD([a], { lr: 0.1 });
    // before: added later, a misspelt name was kept and did nothing (the constructor refused it)
    expect(() => sgd.addParamGroup({ params: [b], weight_decay: 0.5 } as never)).toThrow(
      /SGD parameter group 1: unknown option "weight_decay"; did you mean weightDecay\?/,
    );
    expect(() => sgd.addParamGroup({ params: [b], lr: Number.NaN })).toThrow(OptimizerError);
    expect(sgd.paramGroups.length).toBe(1);
  });

  // probe BU: set by hand between steps, a misspelt name was ignored and a string lr failed in the kernel
  it('hyperparameters set by hand between steps are checked at step(); betas are per group and frozen', () => {
    const [a, b] = params();
    const sgd = new SGD([{ params: [a] }, { params: [b] }], { lr: 0.1 });
    const byHand = (g: number) => sgd.paramGroups[g] as unknown as Record<string, unknown>;
    a.grad = tf.onesLike(a.data);
    byHand(1).weight_decay = 0.5;
    expect(() => sgd.step()).toThrow(
      /SGD step\(\): param group 1: unknown option "weight_decay"; did you mean weightDecay\?/,
    );
    delete byHand(1).weight_decay;
    byHand(0).lr = '0.2';
    expect(() => sgd.step()).toThrow(/SGD step\(\): param group 0 needs a learning rate lr >= 0, got 0.2/);
    // torch's betas is a tuple: a group's changed in place changed every group's and the defaults' (one array)
    const adam = new Adam([{ params: [a] }, { params: [b] }], { lr: 0.1 });
    expect(() => {
      (adam.paramGroups[1].betas as number[])[0] = 0.5;
    }).toThrow(TypeError);
    adam.paramGroups[1].betas = [0.5, 0.999];
    expect([adam.paramGroups[0].betas, adam.defaults.betas]).toEqual([
      [0.9, 0.999],
      [0.9, 0.999],
    ]);
    // the caller's options object stays theirs (ZeRO completing its defaults wrote into a shared config)
    const cfg = { lr: 0.01, betas: [0.8, 0.9] as [number, number] };
    const first = new AdamW([a], cfg);
    expect([cfg, first.defaults.betas === cfg.betas]).toEqual([{ lr: 0.01, betas: [0.8, 0.9] }, false]);
  });

  it('Dropout: p outside [0, 1]; p = 1 drops everything with a zero gradient, as torch', async () => {
    expect(() => new Dropout(1.5)).toThrow(ModuleError);
    expect(() => new Dropout(-0.5)).toThrow(/Dropout: probability must be a number in \[0, 1\], got -0\.5/);
    const x = tensor([1, -2, 3], [3], { requiresGrad: true });
    const y = tidy(() => new Dropout(1).forward(x));
    y.retain();
    await y.sum().backward();
    expect([Array.from(y.dataSync()).map(Math.abs), Array.from(x.grad!.dataSync())]).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
  });
});
