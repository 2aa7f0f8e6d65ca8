// One stage of loss.multiprocess.test.ts (pp = 2): 3 steps with a mostly padded row, with a 'sum'
// loss, with nothing trainable on stage 0, and hand-written schedules that skip a backward.
// Prints the stage's weights and losses per case, or the error.
import { destroyProcessGroup, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import {
  type Action,
  type MicroBatch,
  makeSchedule,
  PipelineStage,
  type PipelineStepOptions,
  pipelineStep,
  type Schedule,
} from '../index.js';
import { buildParts, CFG, freeze, makeOptimizer, namedValues, onFirstOfTwo, paddedRows, rows, split } from './model.js';

await initProcessGroup({ timeoutMs: 30_000 });
const grid = await ProcessGroupManager.create({ pp: 2, timeoutMs: 30_000 });
const STEPS = 3;
const activationShape = [CFG.microBatch, CFG.seq, CFG.dim];

async function train(
  stage: PipelineStage,
  batchOf: (step: number) => MicroBatch[],
  opts: Partial<PipelineStepOptions>,
) {
  const opt = makeOptimizer(stage);
  const losses: (number | null)[] = [];
  try {
    for (let step = 0; step < STEPS; step++) {
      const res = await pipelineStep(stage, batchOf(step), { ppGroup: grid.ppGroup, activationShape, ...opts });
      losses.push(res.loss);
      opt.step();
      opt.zeroGrad();
    }
    return { params: namedValues(stage), losses };
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}` };
  } finally {
    opt.dispose();
    stage.dispose();
  }
}

/** AFAB as written by hand, but without micro-batch 1's backward (and its gradient's transfer). */
const skipped: Schedule = makeSchedule('afab', grid.ppRank, 2, 2).flatMap((a): Action[] => {
  if (a.op !== 'comm') return a.op === 'backward' && a.microBatch === 1 ? [] : [a];
  const transfers = a.transfers.filter((t) => t.channel !== 'gradient' || t.microBatch !== 1);
  return transfers.length ? [{ ...a, transfers }] : [];
});

const frozenFirst = new PipelineStage(buildParts(), grid.ppRank, 2);
freeze(frozenFirst, onFirstOfTwo);
const cases = {
  padded: await train(new PipelineStage(buildParts(), grid.ppRank, 2), (s) => split(paddedRows(s)), {}),
  sum: await train(new PipelineStage(buildParts('sum'), grid.ppRank, 2), (s) => split(rows(s, 0, 4)), {
    lossReduction: 'sum',
  }),
  frozenFirst: await train(frozenFirst, (s) => split(rows(s, 0, 4)), {}),
  skipped: await train(new PipelineStage(buildParts(), grid.ppRank, 2), (s) => split(rows(s, 0, 4)), {
    schedule: skipped,
  }),
};
console.log(`RESULT ${JSON.stringify({ rank: grid.ppRank, cases })}`);
await destroyProcessGroup();
