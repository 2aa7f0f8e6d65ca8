import { tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import { Adam } from './adam.js';
import { OptimizerError, type OptimizerStateDict } from './optimizer.js';
import { SGD, type SGDOptions } from './sgd.js';

const weight = () => tensor([1, 2, 3], [3], { requiresGrad: true });
const sgd = () => new SGD([weight()], { lr: 0.1, momentum: 0.9, weightDecay: 0.05 });

/** torch's SGD state_dict with its own names, as a user dumps it from Python (probe AE). */
const torchNamed = (): OptimizerStateDict<SGDOptions> =>
  ({
    state: new Map([[0, { momentum_buffer: tf.ones([3]) }]]),
    paramGroups: [{ lr: 0.1, momentum: 0.9, dampening: 0, weight_decay: 0.05, nesterov: false, params: [0] }],
  }) as never;

// probe AE: torch's names were kept beside ddp's and ignored: weight decay off, momentum restarted (0.154 off torch)
describe('loadStateDict refuses what the optimizer does not know, changing nothing', () => {
  it("a group hyperparameter of torch's name: OptimizerError with ddp's name", () => {
    const opt = sgd();
    const sd = torchNamed();
    sd.state.clear();
    expect(() => opt.loadStateDict(sd)).toThrow(OptimizerError);
    expect(() => opt.loadStateDict(sd)).toThrow(
      /^loadStateDict: SGD parameter group 0: unknown option "weight_decay"; did you mean weightDecay\?/,
    );
    expect(opt.paramGroups[0]).not.toHaveProperty('weight_decay');
  });

  it("a state entry of torch's name: OptimizerError naming it and what SGD keeps", () => {
    const opt = sgd();
    const sd = torchNamed();
    const [{ weight_decay: _w, ...group }] = sd.paramGroups as unknown as Record<string, unknown>[];
    const ddpGroups = [{ ...group, weightDecay: 0.05 }] as never;
    expect(() => opt.loadStateDict({ ...sd, paramGroups: ddpGroups })).toThrow(
      /the state of parameter 0 holds momentum_buffer, which SGD does not keep \(its state: momentumBuffer/,
    );
    expect(opt.state.size).toBe(0);
  });

  it('values the constructor refuses: refused from a state dict too', () => {
    const adam = new Adam([weight()], { lr: 0.1 });
    const sd = adam.stateDict();
    const load = (change: object) => () =>
      adam.loadStateDict({ ...sd, paramGroups: [{ ...sd.paramGroups[0], ...change }] });
    expect(load({ lr: -1 })).toThrow(/loadStateDict: Adam parameter group 0: invalid learning rate -1/);
    expect(load({ betas: ['0.9', '0.999'] })).toThrow(/invalid betas/);
    const plain = new SGD([weight()], { lr: 0.1 });
    const nesterov = { ...plain.stateDict().paramGroups[0], nesterov: true };
    expect(() => plain.loadStateDict({ state: new Map(), paramGroups: [nesterov] })).toThrow(
      /Nesterov momentum requires a momentum/,
    );
    expect(adam.paramGroups[0].lr).toBe(0.1);
  });

  // probe AE: an older file's state dict carries no kind; SGD's loaded into Adam without a word
  it("another optimizer's state dict without its kind: refused by its names", () => {
    const sgdState = sgd().stateDict();
    const adam = new Adam([weight()], { lr: 0.1 });
    expect(() => adam.loadStateDict({ ...sgdState, kind: undefined } as never)).toThrow(
      /Adam parameter group 0: unknown option "momentum"/,
    );
  });

  it("its own state dict, and a scheduler's initialLr with it, still load", () => {
    const opt = sgd();
    const sd = opt.stateDict();
    sd.paramGroups[0] = { ...sd.paramGroups[0], initialLr: 0.1 } as never;
    opt.loadStateDict(sd);
    expect(opt.paramGroups[0].weightDecay).toBe(0.05);
  });
});
