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
export { checkSchedule, ScheduleError, type ScheduleErrorKind } from './check.js';
export { distributeLayers, PipelineStage, PipelineStageError, type PipelineParts } from './stage.js';
export { type MicroBatch, pipelineStep, type PipelineStepOptions, type PipelineStepResult } from './run.js';
export { allReduceGradients } from './grad-sync.js';
