// One stage of agreement.multiprocess.test.ts: pipelineStep where the stages disagree on the
// micro-batch count (the last stage passes one more) or on the activation shape (another size, or the same
// size in another layout), under each
// schedule. Prints each call's outcome: 'ok' or the error.
import { destroyProcessGroup, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { PipelineStage, pipelineStep } from '../index.js';
import { buildParts, CFG, microBatches } from './model.js';

const world = await initProcessGroup({ timeoutMs: 20_000 });
const grid = await ProcessGroupManager.create({ pp: world.size, timeoutMs: 20_000 });
const stage = new PipelineStage(buildParts(), grid.ppRank, grid.ppSize);
const shape = [CFG.microBatch, CFG.seq, CFG.dim];
const outcome = (run: Promise<unknown>) =>
  run.then(
    () => 'ok',
    (error: Error) => `${error.name}: ${error.message}`,
  );
const results: Record<string, string> = {};
for (const schedule of ['1f1b', 'afab'] as const) {
  const batches = microBatches(0, 0);
  if (stage.isLast) batches.push(microBatches(1, 0)[0]);
  results[`${schedule} counts`] = await outcome(
    pipelineStep(stage, batches, { ppGroup: grid.ppGroup, activationShape: shape, schedule }),
  );
  const activationShape = stage.isLast ? [CFG.microBatch, CFG.seq, CFG.dim + 1] : shape;
  results[`${schedule} shapes`] = await outcome(
    pipelineStep(stage, microBatches(0, 0), { ppGroup: grid.ppGroup, activationShape, schedule }),
  );
  // the same size in another layout: the last stage would read [seq, batch, dim] values as [batch, seq, dim]
  const layout = stage.isLast ? [CFG.seq, CFG.microBatch, CFG.dim] : shape;
  results[`${schedule} layout`] = await outcome(
    pipelineStep(stage, microBatches(0, 0), { ppGroup: grid.ppGroup, activationShape: layout, schedule }),
  );
}
for (const p of stage.parameters()) p.grad = null;
results.agreed = await outcome(
  pipelineStep(stage, microBatches(0, 0), { ppGroup: grid.ppGroup, activationShape: shape }),
);
console.log(`RESULT ${JSON.stringify({ rank: world.rank, results })}`);
stage.dispose();
await destroyProcessGroup();
