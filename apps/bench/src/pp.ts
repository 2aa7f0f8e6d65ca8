/**
 * `pnpm bench pp`: each pipeline stage's bubble (1 − compute / elapsed) under AFAB and 1F1B
 * for 1–8 micro-batches on 2 stages, beside the ideal (p − 1)/(m + p − 1). Writes results/pp.*.
 */
import { fileURLToPath } from 'node:url';
import { crossEntropy, type Indices, type Tensor } from '@ddp/autograd';
import { destroyProcessGroup, getWorldSize, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { Embedding, Generator, LayerNorm, Linear, Sequential, TransformerBlock } from '@ddp/nn';
import { idealBubbleFraction, PipelineStage, pipelineStep, type ScheduleName } from '@ddp/pp';
import { CHARTS } from './lib/charts.js';
import { benchCommand, rankFlag } from './lib/flags.js';
import { printSample, runSampleWorld } from './lib/world.js';

const STAGES = 2;
const STEPS = 4; // the first is a warm-up and is not counted
const [vocab, dim, heads, seq, batch] = [64, 64, 4, 32, 4];

interface BubbleSample {
  schedule: ScheduleName;
  microBatches: number;
  stage: number;
  bubble: number;
  ideal: number;
  stepMs: number;
}

async function rank(): Promise<void> {
  await initProcessGroup({ timeoutMs: 120_000 });
  const pp = getWorldSize();
  const grid = await ProcessGroupManager.create({ dp: 1, pp });
  const build = () => {
    const generator = new Generator(1);
    const parts = {
      embedding: new Embedding(vocab, dim, { generator }),
      layers: [...Array(2 * pp).keys()].map(() => new TransformerBlock(dim, heads, { generator })),
      head: new Sequential(new LayerNorm(dim), new Linear(dim, vocab, { generator })),
      lossFn: (o: Tensor, t: Indices) => crossEntropy(o.reshape([-1, vocab]), t),
    };
    return new PipelineStage(parts, grid.ppRank, pp);
  };
  const input = [...Array(batch).keys()].map((i) => [...Array(seq).keys()].map((j) => (i * 7 + j * 3) % vocab));
  const target = input.flat();
  for (const schedule of ['afab', '1f1b'] as ScheduleName[]) {
    for (const m of [1, 2, 4, 8]) {
      const stage = build();
      let compute = 0;
      let elapsed = 0;
      for (let step = 0; step < STEPS; step++) {
        const microBatches = [...Array(m)].map(() => ({ input, target }));
        const r = await pipelineStep(stage, microBatches, {
          ppGroup: grid.ppGroup,
          activationShape: [batch, seq, dim],
          schedule,
        });
        stage.zeroGrad();
        if (step > 0) {
          compute += r.computeMs;
          elapsed += r.elapsedMs;
        }
      }
      const sample: BubbleSample = {
        schedule,
        microBatches: m,
        stage: grid.ppRank,
        bubble: 1 - compute / elapsed,
        ideal: idealBubbleFraction(pp, m),
        stepMs: elapsed / (STEPS - 1),
      };
      printSample(sample);
      stage.dispose();
    }
  }
  await destroyProcessGroup();
}

async function main(): Promise<void> {
  const args = ['--conditions=@ddp/source', '--import', 'tsx', fileURLToPath(import.meta.url), '--rank'];
  const rows = (await runSampleWorld<BubbleSample>(STAGES, process.execPath, args))
    .flat()
    .map((s) => ({ ...s, series: `${s.schedule} stage ${s.stage}` }));
  const { writeReport } = await import('@ddp/plot');
  const files = await writeReport(fileURLToPath(new URL('../results', import.meta.url)), 'pp', rows, {
    chart: CHARTS.pp.chart({}, rows),
    notes: 'bubble = 1 − compute / elapsed per stage, median of 3 steps after a warm-up; ideal = (p − 1)/(m + p − 1).',
  });
  console.log(`wrote ${files.join(', ')}`);
}

const flags = benchCommand('pp', "each pipeline stage's bubble under AFAB and 1F1B")
  .addOption(rankFlag())
  .parse()
  .opts<{ rank?: boolean }>();
await (flags.rank ? rank() : main());
