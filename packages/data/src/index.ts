export {
  type Collated,
  type CollateOptions,
  createCollate,
  defaultCollate,
  type NDArray,
  type SampleArray,
} from './collate.js';
export { DataLoader, type DataLoaderOptions } from './dataloader.js';
export { ArrayDataset, Dataset, GeneratorDataset, IterableDataset } from './dataset.js';
export {
  DistributedSampler,
  type DistributedSamplerOptions,
  distributedIndices,
  samplesPerReplica,
} from './distributed-sampler.js';
export {
  CollateError,
  DataArgumentError,
  DataError,
  IdxFormatError,
  MnistNotInstalledError,
  NoProcessGroupError,
} from './errors.js';
export { Generator, type GeneratorState } from './generator.js';
export { type IdxArray, type IdxDtype, parseIdx } from './idx.js';
export { loadMnist, type Mnist, MnistDataset, type MnistSplit, mnistDataDir } from './mnist.js';
export { RandomSampler, type Sampler, SequentialSampler } from './sampler.js';
export { ShardedIterableDataset, type ShardOptions } from './shard.js';
