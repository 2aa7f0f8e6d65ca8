import { tensor, tidy } from '@ddp/autograd';
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

  it('Dropout: p outside [0, 1]; p = 1 drops everything with a zero gradient, as torch', async () => {
    expect(() => new Dropout(1.5)).toThrow(ModuleError);
    expect(() => new Dropout(-0.5)).toThrow(/Dropout: probability must be in \[0, 1\], got -0\.5/);
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
