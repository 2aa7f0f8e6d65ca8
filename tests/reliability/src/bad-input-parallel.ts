import { mse, tensor, zeros } from '@ddp/autograd';
import { clipLoss, ntXentLoss } from '@ddp/contrastive';
import { fullyShard } from '@ddp/fsdp';
import { join } from '@ddp/join';
import { Sequential, SGD, Tanh } from '@ddp/nn';
import { DistributedDataParallel } from '@ddp/reducer';
import { SyncBatchNorm } from '@ddp/syncbn';
import { type OptimizerClass, ZeroRedundancyOptimizer } from '@ddp/zero';
import { type BadInputCase, mlp, params, world } from './bad-input.js';

/** Bad-input rows for the parallel algorithms (join, reducer, zero, syncbn, contrastive). */

const sgd = SGD as unknown as OptimizerClass<{ lr: number }>;

/** One DDP step on an input holding `value`; checkFinite undefined keeps DDP's default. */
async function nonFiniteStep(value: number, checkFinite?: boolean): Promise<void> {
  await world();
  const model = mlp();
  const ddp = await DistributedDataParallel.create(model, checkFinite === undefined ? {} : { checkFinite });
  const x = tensor([[1, 2, 3, value]], [1, 4]);
  const loss = mse(ddp.forward(x), zeros([1, 2]));
  try {
    await loss.backward();
  } finally {
    loss.dispose();
    x.dispose();
  }
}

export const PARALLEL_CASES: BadInputCase[] = [
  {
    pkg: 'contrastive',
    entry: 'ntXentLoss',
    input: '{ temperature: 0.1 } (its option is tau)',
    expect: 'ContrastiveError',
    call: () => ntXentLoss(tensor([1, 2, 3, 4], [2, 2]), tensor([4, 3, 2, 1], [2, 2]), { temperature: 0.1 } as object),
  },
  {
    pkg: 'zero',
    entry: 'ZeroRedundancyOptimizer',
    input: "{ stage_: 2 } (a misspelt stage: stage 1's memory)",
    expect: 'ZeroError',
    call: () => new ZeroRedundancyOptimizer(params(), sgd, { lr: 0.1 }, { stage_: 2 } as object),
  },
  {
    pkg: 'fsdp',
    entry: 'fullyShard',
    input: '{ reshard_after_forward: false }',
    expect: 'FSDPError',
    mustName: 'reshardAfterForward',
    call: () => fullyShard(mlp(), { reshard_after_forward: false } as object),
  },
  {
    pkg: 'join',
    entry: 'join',
    input: 'no joinables',
    expect: 'JoinArgumentError',
    call: () => join([], async () => 1),
  },
  {
    pkg: 'reducer',
    entry: 'DistributedDataParallel.create',
    input: 'bucketCapMB -1',
    expect: 'DDPUsageError',
    call: async () => {
      await world();
      return DistributedDataParallel.create(mlp(), { bucketCapMB: -1 });
    },
  },
  {
    pkg: 'reducer',
    entry: 'DistributedDataParallel.create',
    input: 'a module without parameters',
    expect: 'DDPUsageError',
    call: async () => {
      await world();
      return DistributedDataParallel.create(new Sequential(new Tanh()));
    },
  },
  {
    pkg: 'reducer',
    entry: 'loss.backward (DDP, checkFinite)',
    input: 'NaN in the input → NaN gradient',
    expect: 'NonFiniteGradientError',
    mustName: 'the gradient of "',
    call: () => nonFiniteStep(Number.NaN, true),
  },
  {
    pkg: 'reducer',
    entry: 'loss.backward (DDP, checkFinite)',
    input: 'Inf in the input → Inf gradient',
    expect: 'NonFiniteGradientError',
    mustName: 'the gradient of "',
    call: () => nonFiniteStep(Number.POSITIVE_INFINITY, true),
  },
  {
    pkg: 'reducer',
    entry: 'loss.backward (DDP, default options)',
    input: 'NaN in the input → NaN gradient',
    expect: 'NonFiniteGradientError',
    call: () => nonFiniteStep(Number.NaN),
  },
  {
    pkg: 'zero',
    entry: 'ZeroRedundancyOptimizer',
    input: 'stage 3',
    expect: 'ZeroError',
    call: async () => {
      await world();
      return new ZeroRedundancyOptimizer(params(), sgd, { lr: 0.1 }, { stage: 3 as 1 });
    },
  },
  {
    pkg: 'zero',
    entry: 'ZeroRedundancyOptimizer',
    input: 'no parameters',
    expect: 'ZeroError',
    call: async () => {
      await world();
      return new ZeroRedundancyOptimizer([], sgd, { lr: 0.1 });
    },
  },
  {
    pkg: 'zero',
    entry: 'ZeroRedundancyOptimizer',
    input: 'lr -1',
    expect: 'OptimizerError',
    call: async () => {
      await world();
      return new ZeroRedundancyOptimizer(params(), sgd, { lr: -1 });
    },
  },
  {
    pkg: 'syncbn',
    entry: 'SyncBatchNorm',
    input: 'numFeatures -1',
    expect: 'SyncBatchNormError',
    call: async () => {
      await world();
      return new SyncBatchNorm(-1);
    },
  },
  {
    pkg: 'contrastive',
    entry: 'clipLoss',
    input: 'feature dims 4 vs 3',
    expect: 'ContrastiveError',
    call: async () => {
      await world();
      return clipLoss(zeros([2, 4]), zeros([2, 3]), tensor([1], [1]));
    },
  },
  {
    pkg: 'contrastive',
    entry: 'ntXentLoss',
    input: 'tau -1',
    expect: 'ContrastiveError',
    call: async () => {
      await world();
      return ntXentLoss(zeros([2, 4]), zeros([2, 4]), { tau: -1 });
    },
  },
];
