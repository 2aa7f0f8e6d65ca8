import { tensor } from '@ddp/autograd';
import { describe, expect, it } from 'vitest';
import {
  Adam,
  AdamW,
  BatchNorm2d,
  Conv2d,
  CrossEntropyLoss,
  clipGradNorm,
  Dropout,
  Embedding,
  LayerNorm,
  Linear,
  MaxPool2d,
  ModuleError,
  MultiheadAttention,
  OptimizerError,
  SGD,
  TransformerBlock,
} from './index.js';

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

  // TypeScript refuses such keys in an object literal only; a config read from JSON (or a variable holding
  // a known key besides) passes, and they were ignored
  it('options ddp does not know, from a config ported from PyTorch', () => {
    const params = () => new Linear(2, 1).parameters();
    const config = (json: string) => JSON.parse(json);
    expect(() => new SGD(params(), config('{ "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4 }'))).toThrow(
      /SGD: unknown option "weight_decay"; did you mean weightDecay\?/,
    );
    expect(() => new AdamW(params(), config('{ "lr": 1e-3, "weight_decay": 0.1 }'))).toThrow(OptimizerError);
    expect(() => new Adam([{ params: params(), ...config('{ "lr": 0.1, "weight_decay": 0 }') }])).toThrow(
      /Adam parameter group 0: unknown option "weight_decay"/,
    );
    expect(() => new SGD([{ params: params(), ...config('{ "initialLr": 0.1 }') }], { lr: 0.1 })).not.toThrow();
    expect(() => new Embedding(10, 4, config('{ "padding_idx": 0 }'))).toThrow(
      /Embedding: unknown option "padding_idx"; did you mean paddingIdx\?/,
    );
    expect(() => new CrossEntropyLoss(config('{ "labelSmoothing": 0.1 }'))).toThrow(ModuleError);
    const layers: [string, () => unknown][] = [
      ['Linear', () => new Linear(2, 3, config('{ "bias": false, "device": "cpu" }'))],
      ['LayerNorm', () => new LayerNorm(4, config('{ "elementwise_affine": false }'))],
      ['BatchNorm2d', () => new BatchNorm2d(4, config('{ "track_running_stats": false }'))],
      ['Conv2d', () => new Conv2d(1, 1, 3, config('{ "dilation": 2 }'))],
      ['Dropout', () => new Dropout(0.5, config('{ "inplace": true }'))],
      ['MultiheadAttention', () => new MultiheadAttention(4, 2, config('{ "batch_first": true }'))],
      ['TransformerBlock', () => new TransformerBlock(4, 2, config('{ "mlp_ratio": 2 }'))],
    ];
    for (const [name, make] of layers) expect(make, name).toThrow(new RegExp(`^${name}: unknown option`));
  });

  // torch's positional arguments land in the options' place: a number or boolean destructured to
  // nothing, so the bias stayed, eps/stride/padding kept their defaults and Adam trained at 1e-3
  it("torch's positional arguments where ddp takes named options", () => {
    const positional = (v: unknown) => v as never;
    const layers: [string, () => unknown][] = [
      ['Linear', () => new Linear(3, 2, positional(false))],
      ['Conv2d', () => new Conv2d(1, 4, 3, positional(2))],
      ['LayerNorm', () => new LayerNorm(4, positional(1e-6))],
      ['BatchNorm2d', () => new BatchNorm2d(3, positional(1e-3))],
      ['Embedding', () => new Embedding(10, 3, positional(0))],
      ['MaxPool2d', () => new MaxPool2d(2, positional(1))],
      ['Dropout', () => new Dropout(0.5, positional(true))],
      ['MultiheadAttention', () => new MultiheadAttention(8, 2, positional(0.1))],
      ['TransformerBlock', () => new TransformerBlock(8, 2, positional(4))],
    ];
    for (const [name, make] of layers) {
      expect(make, name).toThrow(ModuleError);
      expect(make, name).toThrow(new RegExp(`^${name}: options must be an object of named options, got `));
    }
    const params = () => new Linear(2, 1).parameters();
    expect(() => new SGD(params(), positional(0.1))).toThrow(/SGD: options must be an object of named options/);
    expect(() => new Adam(params(), positional(0.5))).toThrow(OptimizerError);
  });

  // each was truthy: `maximize: 'false'` stepped uphill, `bias: 'false'` kept the bias, `causal: 'false'` masked
  it('boolean options given anything but true or false (a string from a config)', () => {
    const no = 'false' as never;
    const params = () => new Linear(2, 1).parameters();
    const x = tensor([[[1, 2, 3, 4]]]);
    const cases: [string, () => unknown][] = [
      ['Linear: bias', () => new Linear(3, 2, { bias: no })],
      ['Conv2d: bias', () => new Conv2d(1, 4, 3, { bias: no })],
      ['LayerNorm: elementwiseAffine', () => new LayerNorm(4, { elementwiseAffine: no })],
      ['LayerNorm: bias', () => new LayerNorm(4, { bias: no })],
      ['BatchNorm2d: affine', () => new BatchNorm2d(3, { affine: no })],
      ['BatchNorm2d: trackRunningStats', () => new BatchNorm2d(3, { trackRunningStats: no })],
      ['MultiheadAttention: causal', () => new MultiheadAttention(4, 2, { causal: no })],
      ['MultiheadAttention.forward: isCausal', () => new MultiheadAttention(4, 2).forward(x, x, x, { isCausal: no })],
      ['TransformerBlock: causal', () => new TransformerBlock(4, 2, { causal: no })],
      ['SGD: maximize', () => new SGD(params(), { lr: 0.1, maximize: no })],
      ['SGD: nesterov', () => new SGD(params(), { lr: 0.1, momentum: 0.9, nesterov: no })],
      ['Adam: amsgrad', () => new Adam(params(), { amsgrad: no })],
      ['AdamW: maximize', () => new AdamW(params(), { maximize: no })],
      ['clipGradNorm: errorIfNonfinite', () => clipGradNorm(params(), 1, 2, no)],
    ];
    for (const [what, make] of cases) expect(make, what).toThrow(`${what} must be a boolean, got "false"`);
    // as torch: the string was truthy, the model stayed in training mode (dropout on) where eval was meant
    expect(() => new Linear(2, 1).train(no)).toThrow('Module.train: mode must be a boolean, got "false"');
  });

  // each passed its constructor (a range check coerces '1e-5') and failed untyped in a kernel at the first forward
  it('numeric options given a string (from a config)', () => {
    const s = (v: string) => v as never;
    const cases: [string, () => unknown][] = [
      ['LayerNorm: eps', () => new LayerNorm(4, { eps: s('1e-5') })],
      ['BatchNorm2d: momentum', () => new BatchNorm2d(3, { momentum: s('0.1') })],
      ['BatchNorm2d: eps', () => new BatchNorm2d(3, { eps: s('1e-5') })],
      ['MultiheadAttention: dropout', () => new MultiheadAttention(4, 2, { dropout: s('0.1') })],
      ['TransformerBlock: mlpRatio', () => new TransformerBlock(4, 2, { mlpRatio: s('4') })],
    ];
    for (const [what, make] of cases) expect(make, what).toThrow(`${what} must be a number, got "`);
    expect(() => new Dropout(s('0.5'))).toThrow('Dropout: probability must be a number in [0, 1], got "0.5"');
    const params = new Linear(2, 1).parameters();
    expect(() => new Adam(params, { betas: ['0.9', '0.999'] as never })).toThrow(/Adam: invalid betas/);
    expect(new BatchNorm2d(3, { momentum: null }).momentum).toBeNull(); // null: a cumulative average, as torch
  });

  // torch's padding='same' failed untyped (`p.every is not a function`) at the first forward
  it('Conv2d sizes that are not integers or pairs of them', () => {
    const same = () => new Conv2d(1, 1, 3, { padding: 'same' as never });
    expect(same).toThrow(/^Conv2d: padding must be an integer >= 0 or a pair of them, got "same"/);
    expect(same).toThrow(/padding 'same' and 'valid' are not offered/);
    for (const make of [
      () => new Conv2d(1, 1, 0),
      () => new Conv2d(1, 1, [3, 1.5] as never),
      () => new Conv2d(1, 1, 3, { stride: 0 }),
      () => new Conv2d(1, 1, 3, { padding: -1 }),
      () => new Conv2d(1, 1, 3, { padding: [1, 1, 1] as never }),
      // were tfjs's "shape comprised of positive integers" and a RangeError
      () => new Conv2d(1.5, 4, 3),
      () => new Conv2d(3, -1, 3),
    ])
      expect(make).toThrow(ModuleError);
    expect(new Conv2d(1, 1, [3, 1], { stride: [2, 1], padding: [1, 0] }).padding).toEqual([1, 0]);
  });

  // an async forward (FSDP's, a tensor-parallel block's) not awaited, fed to a layer: TypeErrors from deep inside
  it('a Promise given as the input: refused by each layer, saying to await it', () => {
    const pending = Promise.resolve(tensor([1, 2, 3, 4], [1, 4])) as never;
    const layers: [string, () => unknown][] = [
      ['Linear', () => new Linear(4, 2).forward(pending)],
      ['LayerNorm', () => new LayerNorm(4).forward(pending)],
      ['BatchNorm2d', () => new BatchNorm2d(1).forward(pending)],
      ['MultiheadAttention', () => new MultiheadAttention(4, 2).forward(pending)],
      ['conv2d', () => new Conv2d(1, 1, 1).forward(pending)],
      ['TransformerBlock', () => new TransformerBlock(4, 2).forward(pending)],
    ];
    for (const [name, call] of layers)
      expect(call, name).toThrow(/argument 0 is a Promise, not a Tensor: await the call that returned it/);
  });
});
