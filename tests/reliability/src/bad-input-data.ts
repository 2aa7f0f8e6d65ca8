import { ArrayDataset, DataLoader, DistributedSampler, defaultCollate, loadMnist } from '@ddp/data';
import type { BadInputCase } from './bad-input.js';

/** Bad-input rows for data: loaders, samplers, collation, datasets on disk. */
export const DATA_CASES: BadInputCase[] = [
  {
    pkg: 'data',
    entry: 'DataLoader',
    input: 'batchSize 0',
    expect: 'DataArgumentError',
    call: () => new DataLoader(new ArrayDataset([1, 2, 3]), { batchSize: 0 }),
  },
  {
    pkg: 'data',
    entry: 'DataLoader',
    input: 'batchSize -2',
    expect: 'DataArgumentError',
    call: () => new DataLoader(new ArrayDataset([1, 2, 3]), { batchSize: -2 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'rank 5 of 2 replicas',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(10, { rank: 5, numReplicas: 2 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'numReplicas -1',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(10, { rank: 0, numReplicas: -1 }),
  },
  {
    pkg: 'data',
    entry: 'DistributedSampler',
    input: 'dataset length -3',
    expect: 'DataArgumentError',
    call: () => new DistributedSampler(-3, { rank: 0, numReplicas: 1 }),
  },
  {
    pkg: 'data',
    entry: 'defaultCollate',
    input: 'samples of shapes [2] and [3]',
    expect: 'CollateError',
    call: () => defaultCollate([new Float32Array(2), new Float32Array(3)] as never),
  },
  {
    pkg: 'data',
    entry: 'loadMnist',
    input: 'a directory without MNIST',
    expect: 'DataError',
    call: () => loadMnist({ dir: '/nonexistent' } as never),
  },
];
