// One rank of the pipeline tests: trains the test transformer with AFAB, then afresh with 1F1B,
// and prints its stage's weights, losses, activation peaks and tensor counts as a RESULT line.
import { destroyProcessGroup, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { tf } from '@ddp/tensor';
import { PipelineStage, pipelineStep, type ScheduleName } from '../index.js';
import { buildParts, CFG, makeOptimizer, microBatches, namedValues } from './model.js';

const [pp, dp, steps] = process.argv.slice(2).map(Number) as [number, number, number];
await initProcessGroup({ timeoutMs: 60_000 });
const grid = await ProcessGroupManager.create({ dp, pp, timeoutMs: 60_000 });

const runs: Record<string, unknown> = {};
for (const schedule of ['afab', '1f1b'] as ScheduleName[]) {
  const stage = new PipelineStage(buildParts(), grid.ppRank, pp);
  const opt = makeOptimizer(stage);
  const losses: (number | null)[] = [];
  const numTensors: number[] = [];
  let peakLive = 0;
  let peakBytes = 0;
  for (let step = 0; step < steps; step++) {
    const res = await pipelineStep(stage, microBatches(step, grid.dpRank), {
      ppGroup: grid.ppGroup,
      dpGroup: grid.dpGroup,
      activationShape: [CFG.microBatch, CFG.seq, CFG.dim],
      schedule,
    });
    opt.step();
    opt.zeroGrad();
    losses.push(res.loss);
    numTensors.push(tf.memory().numTensors);
    peakLive = Math.max(peakLive, res.peakLiveActivations);
    peakBytes = Math.max(peakBytes, res.peakBytes);
  }
  runs[schedule] = { params: namedValues(stage), losses, numTensors, peakLive, peakBytes };
  opt.dispose();
  stage.dispose();
}
console.log(`RESULT ${JSON.stringify({ rank: grid.globalRank, ppRank: grid.ppRank, dpRank: grid.dpRank, runs })}`);
await destroyProcessGroup();
