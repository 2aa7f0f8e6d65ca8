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
