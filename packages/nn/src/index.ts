export { Generator, GeneratorStateError, type GeneratorState, defaultGenerator, manualSeed, philox4x32 } from './generator.js';
export * as init from './init.js';
export { temporarySibling, writeFileAtomic } from './atomic.js';
export {
  loadSafetensors,
  type ParsedSafetensors,
  parseSafetensors,
  type SafeTensor,
  SafetensorsError,
  type SafetensorsErrorKind,
  saveSafetensors,
  serializeSafetensors,
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
