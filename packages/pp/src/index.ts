export { checkSchedule, ScheduleError, type ScheduleErrorKind } from './check.js';
export { allReduceGradients } from './grad-sync.js';
export type { LossReduction } from './loss-weights.js';
export { type MicroBatch, type PipelineStepOptions, type PipelineStepResult, pipelineStep } from './run.js';
export {
  type Action,
  afabSchedule,
  type Channel,
  describeAction,
  idealBubbleFraction,
  makeSchedule,
  oneFOneBSchedule,
  peakInFlight,
  pipelineSchedules,
  type Schedule,
  type ScheduleName,
  type Transfer,
} from './schedule.js';
export { distributeLayers, type PipelineParts, PipelineStage, PipelineStageError } from './stage.js';
