import { tensor } from '@ddp/autograd';
import { Adam, clipGradNorm, Generator, Linear, loadCheckpoint, parseSafetensors, SGD, StepLR } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { type BadInputCase, mlp, params } from './bad-input.js';

/** Bad-input rows for nn: modules, optimizers, schedulers, state dicts, checkpoints. */
export const NN_CASES: BadInputCase[] = [
  { pkg: 'nn', entry: 'Linear', input: 'inFeatures -1', expect: 'ModuleError', call: () => new Linear(-1, 3) },
  { pkg: 'nn', entry: 'Linear', input: 'outFeatures 2.5', expect: 'ModuleError', call: () => new Linear(3, 2.5) },
  {
    pkg: 'nn',
    entry: 'Linear.forward',
    input: 'input [2,3] into Linear(4, 2)',
    expect: 'ModuleError',
    call: () => new Linear(4, 2).forward(tensor([1, 2, 3, 4, 5, 6], [2, 3])),
  },
  { pkg: 'nn', entry: 'SGD', input: 'lr -1', expect: 'OptimizerError', call: () => new SGD(params(), { lr: -1 }) },
  {
    pkg: 'nn',
    entry: 'SGD',
    input: 'lr missing',
    expect: 'OptimizerError',
    call: () => new SGD(params(), {} as { lr: number }),
  },
  {
    pkg: 'nn',
    entry: 'Adam',
    input: 'betas [1.5, 0.9]',
    expect: 'OptimizerError',
    call: () => new Adam(params(), { betas: [1.5, 0.9] }),
  },
  { pkg: 'nn', entry: 'Adam', input: 'eps -1', expect: 'OptimizerError', call: () => new Adam(params(), { eps: -1 }) },
  {
    pkg: 'nn',
    entry: 'clipGradNorm',
    input: 'maxNorm -1',
    expect: 'OptimizerError',
    call: () => clipGradNorm(params(), -1),
  },
  {
    pkg: 'nn',
    entry: 'StepLR',
    input: 'stepSize 0',
    expect: 'SchedulerError',
    call: () => new StepLR(new SGD(params(), { lr: 0.1 }), 0, 0.1),
  },
  {
    pkg: 'nn',
    entry: 'Module.loadStateDict',
    input: 'a weight of the wrong shape',
    expect: 'StateDictError',
    call: () =>
      new Linear(4, 2).loadStateDict(
        new Map([
          ['weight', tf.zeros([3, 3])],
          ['bias', tf.zeros([2])],
        ]),
      ),
  },
  {
    pkg: 'nn',
    entry: 'Generator',
    input: 'seed NaN',
    expect: 'GeneratorStateError',
    call: () => new Generator(Number.NaN),
  },
  {
    pkg: 'nn',
    entry: 'loadCheckpoint',
    input: 'a directory that does not exist',
    expect: 'CheckpointError',
    call: () => loadCheckpoint('/nonexistent/ckpt', { model: mlp() }),
  },
  {
    pkg: 'nn',
    entry: 'parseSafetensors',
    input: '16 random bytes',
    expect: 'SafetensorsError',
    call: () => parseSafetensors(new Uint8Array([200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])),
  },
];
