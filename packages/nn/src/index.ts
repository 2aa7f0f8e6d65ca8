export {
  gradientShardGroups,
  markGradientShard,
  markParameterShard,
  type NormReduceGroup,
  type ParameterShard,
  parameterShardOf,
  unmarkGradientShard,
} from '@ddp/autograd'; // kept here too: the split parameters' registry moved down for @ddp/amp's GradScaler
export { FileWriteError, temporarySibling, writeFileAtomic } from './atomic.js';
export {
  type CheckpointContents,
  type LoadedCheckpoint,
  latestCheckpoint,
  loadCheckpoint,
  META_FILE,
  MODEL_FILE,
  OPTIMIZER_FILE,
  type SaveOptions,
  saveCheckpoint,
} from './checkpoint.js';
export { SAVE_ID, sameContents, unboundEntry, withSaveId } from './checkpoint-binding.js';
export {
  cleanCheckpointDir,
  commitEntry,
  crashPoint,
  createTemporaryEntry,
  entryToLoad,
  LATEST_LINK,
  latestEntry,
  makeDirectories,
  readNewestEntry,
} from './checkpoint-dir.js';
export { CheckpointError, CheckpointLockError } from './checkpoint-errors.js';
export {
  optimizerParamNames,
  optimizerStateTensors,
  parameterOrderChange,
  refuseParamsOutsideModel,
} from './checkpoint-order.js';
export { modelPart, refuseOtherShards, shardsHeld } from './checkpoint-parts.js';
export { temporaryEntryName } from './checkpoint-temporaries.js';
export { commitManifestEntry, refuseOtherFormat } from './commit-refusals.js';
export { type CommitTurn, takeCommitTurn } from './commit-turn.js';
export {
  defaultGenerator,
  Generator,
  type GeneratorState,
  GeneratorStateError,
  manualSeed,
  philox4x32,
} from './generator.js';
export * as init from './init.js';
export { Dropout, GELU, ReLU, Tanh } from './layers/activation.js';
export { type AttentionCallOptions, MultiheadAttention, type MultiheadAttentionOptions } from './layers/attention.js';
export { ModuleDict, ModuleList, Sequential, type TensorModule } from './layers/container.js';
export { Conv2d, type Conv2dOptions, MaxPool2d, type Pair } from './layers/conv.js';
export { Flatten } from './layers/flatten.js';
export { Embedding, type EmbeddingOptions, Linear, type LinearOptions } from './layers/linear.js';
export {
  BatchNorm,
  BatchNorm1d,
  BatchNorm2d,
  type BatchNormOptions,
  LayerNorm,
  type LayerNormOptions,
} from './layers/norm.js';
export { TransformerBlock, type TransformerBlockOptions } from './layers/transformer.js';
export { type LoadedSave, loadedSave, loadedSaveOf, saveFingerprint } from './loaded-saves.js';
export { CrossEntropyLoss, crossEntropy, MSELoss, mse } from './losses.js';
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
export { Module, ModuleError, type StateDict, StateDictError } from './module.js';
export { kindOf } from './module-errors.js';
export { Adam, type AdamOptions, AdamW } from './optim/adam.js';
export { clipGradNorm, clipGradNormDistributed } from './optim/clip-grad.js';
export {
  Optimizer,
  OptimizerError,
  type OptimizerStateDict,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
  refusePendingGradients,
  refuseStepArguments,
} from './optim/optimizer.js';
export { SGD, type SGDOptions } from './optim/sgd.js';
export { stateDictParams } from './optim/state-dict-check.js';
export { Parameter } from './parameter.js';
export { whileForwarding } from './running-forward.js';
export {
  type SafeTensor,
  SafetensorsError,
  type SafetensorsErrorKind,
  saveSafetensors,
  saveSafetensorsSync,
  serializeSafetensors,
  toSafeTensor,
} from './safetensors.js';
export {
  loadSafetensors,
  type ParsedSafetensors,
  type ParseOptions,
  parseSafetensors,
} from './safetensors-read.js';
export { parseSealedJson, readSealedJson, SealedJsonError, sealJson } from './sealed-json.js';
export { markShardOf, shardOf } from './sharded-gradients.js';
