// Measures each stage's pipeline bubble (1 − compute / elapsed) beside (p − 1)/(m + p − 1):
//   node packages/launch/bin/ddp-run.js --nproc-per-node 2 packages/pp/src/bubble.run.ts
// (not part of the build; apps/bench may take it over as `pnpm bench pp`).
import { crossEntropy, type Indices, type Tensor } from '@ddp/autograd';
import { destroyProcessGroup, getWorldSize, initProcessGroup, ProcessGroupManager } from '@ddp/comm';
import { Embedding, Generator, LayerNorm, Linear, Sequential, TransformerBlock } from '@ddp/nn';
import { idealBubbleFraction, PipelineStage, pipelineStep, type ScheduleName } from './index.js';

const STEPS = 4; // the first is a warm-up and is not counted
const [vocab, dim, heads, seq, batch] = [64, 64, 4, 32, 4];

await initProcessGroup({ timeoutMs: 120_000 });
const pp = getWorldSize();
const grid = await ProcessGroupManager.create({ dp: 1, pp });

function build(): PipelineStage {
  const generator = new Generator(1);
  const parts = {
    embedding: new Embedding(vocab, dim, { generator }),
    layers: [...Array(2 * pp).keys()].map(() => new TransformerBlock(dim, heads, { generator })),
    head: new Sequential(new LayerNorm(dim), new Linear(dim, vocab, { generator })),
    lossFn: (o: Tensor, t: Indices) => crossEntropy(o.reshape([-1, vocab]), t),
  };
  return new PipelineStage(parts, grid.ppRank, pp);
}

const input = [...Array(batch).keys()].map((i) => [...Array(seq).keys()].map((j) => (i * 7 + j * 3) % vocab));
const target = input.flat();
for (const schedule of ['afab', '1f1b'] as ScheduleName[]) {
  for (const m of [1, 2, 4, 8]) {
    const stage = build();
    let compute = 0;
    let elapsed = 0;
    for (let step = 0; step < STEPS; step++) {
      const microBatches = [...Array(m)].map(() => ({ input, target }));
      const r = await pipelineStep(stage, microBatches, { ppGroup: grid.ppGroup, activationShape: [batch, seq, dim], schedule });
      stage.zeroGrad();
      if (step > 0) {
        compute += r.computeMs;
        elapsed += r.elapsedMs;
      }
    }
    const bubble = 1 - compute / elapsed;
    console.log(`${schedule} p=${pp} m=${m} stage=${grid.ppRank} bubble=${bubble.toFixed(3)} ideal=${idealBubbleFraction(pp, m).toFixed(3)} step=${(elapsed / (STEPS - 1)).toFixed(0)}ms`);
    stage.dispose();
  }
}
await destroyProcessGroup();
