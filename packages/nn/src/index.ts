export { Generator, GeneratorStateError, type GeneratorState, defaultGenerator, manualSeed, philox4x32 } from './generator.js';
export * as init from './init.js';
export { FileWriteError, temporarySibling, writeFileAtomic } from './atomic.js';
export {
  cleanCheckpointDir,
  commitEntry,
  crashPoint,
  createTemporaryEntry,
  entryToLoad,
  LATEST_LINK,
  latestEntry,
  temporaryEntryName,
} from './checkpoint-dir.js';
export {
  loadSafetensors,
  type ParsedSafetensors,
  parseSafetensors,
  type SafeTensor,
  SafetensorsError,
  type SafetensorsErrorKind,
  saveSafetensors,
  serializeSafetensors,
  toSafeTensor,
} from './safetensors.js';
export {
  type HasParamGroups,
  LRScheduler,
  SchedulerError,
  type SchedulerState,
  StepLR,
  WarmupCosineLR,
  type WarmupCosineOptions,
  warmupCosineLr,
} from './lr-scheduler.js';
export { Parameter } from './parameter.js';
export { Module, ModuleError, type StateDict, StateDictError } from './module.js';
export {
  Optimizer,
  OptimizerError,
  type OptimizerStateDict,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
} from './optim/optimizer.js';
export { SGD, type SGDOptions } from './optim/sgd.js';
export { Adam, AdamW, type AdamOptions } from './optim/adam.js';
export { clipGradNorm } from './optim/clip-grad.js';
export {
  CheckpointError,
  type CheckpointContents,
  type LoadedCheckpoint,
  latestCheckpoint,
  loadCheckpoint,
  META_FILE,
  MODEL_FILE,
  OPTIMIZER_FILE,
  saveCheckpoint,
} from './checkpoint.js';
export { Linear, type LinearOptions, Embedding } from './layers/linear.js';
export { ReLU, Tanh, GELU, Dropout } from './layers/activation.js';
export { Sequential, ModuleList, type TensorModule } from './layers/container.js';
export { Flatten } from './layers/flatten.js';
export { Conv2d, type Conv2dOptions, MaxPool2d, type Pair } from './layers/conv.js';
export { LayerNorm, type LayerNormOptions, BatchNorm, BatchNorm1d, BatchNorm2d, type BatchNormOptions } from './layers/norm.js';
export { MultiheadAttention, type MultiheadAttentionOptions, type AttentionCallOptions } from './layers/attention.js';
export { TransformerBlock, type TransformerBlockOptions } from './layers/transformer.js';
export { crossEntropy, mse, CrossEntropyLoss, MSELoss } from './losses.js';
