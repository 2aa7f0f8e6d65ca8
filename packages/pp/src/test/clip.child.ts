// One rank of clip.multiprocess.test.ts: one pipeline step of the test transformer (pp = world
// size), then the gradient norm: clipGradNorm on the stage's own gradients (refused: the stage holds
// part of the model), and clipGradNormDistributed over the pipeline group (the whole model's).
import { destroyProcessGroup, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { clipGradNorm, clipGradNormDistributed } from '@ddp/nn';
import { PipelineStage, pipelineStep } from '../index.js';
import { buildParts, CFG, microBatches } from './model.js';

const world = await initProcessGroup({ timeoutMs: 60_000 });
const grid = await ProcessGroupManager.create({ pp: world.size, timeoutMs: 60_000 });
const stage = new PipelineStage(buildParts(), grid.ppRank, grid.ppSize);
await pipelineStep(stage, microBatches(0, 0), {
  ppGroup: grid.ppGroup,
  activationShape: [CFG.microBatch, CFG.seq, CFG.dim],
});
let refused: string | null = null;
try {
  clipGradNorm(stage.parameters(), 1);
} catch (error) {
  refused = `${(error as Error).name}: ${(error as Error).message}`;
}
const norm = await clipGradNormDistributed(stage.parameters(), 1, { groups: [grid.ppGroup] });
console.log(`RESULT ${JSON.stringify({ norm, refused })}`);
stage.dispose();
await destroyProcessGroup();
