import { tensor } from '@ddp/autograd';
import { describe, expect, it } from 'vitest';
import { Adam, BatchNorm2d, clipGradNorm, Embedding, Linear, ModuleError, OptimizerError, SGD } from './index.js';

/** Bad sizes, inputs and options are typed errors (ModuleError, OptimizerError), not tfjs's. */
describe('bad input gets a typed error', () => {
  it('Linear and Embedding with sizes that are not non-negative integers', () => {
    expect(() => new Linear(-1, 3)).toThrow(/Linear: inFeatures must be a non-negative integer, got -1/);
    expect(() => new Linear(3, 2.5)).toThrow(ModuleError);
    expect(() => new Embedding(Number.NaN, 2)).toThrow(ModuleError);
    expect(new Linear(3, 0).weight.shape).toEqual([0, 3]);
    expect(() => new BatchNorm2d(-1)).toThrow(/BatchNorm2d: numFeatures must be a positive integer, got -1/);
  });

  it('Linear.forward with the wrong input width names the layer and the shape', () => {
    expect(() => new Linear(4, 2).forward(tensor([1, 2, 3, 4, 5, 6], [2, 3]))).toThrow(
      /Linear\(4, 2\): input \[2,3\] must end in 4 features/,
    );
  });

  it('SGD and Adam without a usable learning rate; clipGradNorm with a negative maxNorm', () => {
    const params = () => new Linear(2, 1).parameters();
    expect(() => new SGD(params(), {} as { lr: number })).toThrow(OptimizerError);
    expect(() => new SGD(params(), { lr: Number.NaN })).toThrow(/SGD needs a learning rate/);
    expect(() => new Adam(params(), { lr: undefined as unknown as number })).toThrow(OptimizerError);
    expect(() => clipGradNorm(params(), -1)).toThrow(/clipGradNorm: maxNorm must be >= 0, got -1/);
    expect(() => clipGradNorm(params(), 1, 0)).toThrow(OptimizerError);
    expect(clipGradNorm(params(), 0)).toBe(0);
  });
});
