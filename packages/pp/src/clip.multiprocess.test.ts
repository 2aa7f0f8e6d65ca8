import { tidy } from '@ddp/autograd';
import { runWorld } from '@ddp/launch/testing';
import { clipGradNorm } from '@ddp/nn';
import { describe, expect, it } from 'vitest';
import { PipelineStage } from './index.js';
import { buildParts, CFG, rows } from './test/model.js';

/** The gradient norm of the unsplit model on step 0's whole batch (what every stage must agree on). */
async function referenceNorm(): Promise<number> {
  const model = new PipelineStage(buildParts(), 0, 1);
  const { input, target } = rows(0, 0, CFG.numMicroBatches * CFG.microBatch);
  const loss = tidy(() => model.loss(model.forward(input), target));
  await loss.backward();
  loss.dispose();
  const norm = clipGradNorm(model.parameters(), 1);
  model.dispose();
  return norm;
}

describe('gradient clipping over a pipeline', () => {
  it('pp = 2: clipGradNormDistributed gives the whole model norm on every stage; clipGradNorm refuses a stage', async () => {
    const { results } = await runWorld<{ norm: number; refused: string | null }>({
      script: new URL('./test/clip.child.ts', import.meta.url),
      nprocs: 2,
      env: { DDP_HEARTBEAT_MS: '0' },
      timeoutMs: 60_000,
    });
    const want = await referenceNorm();
    for (const r of results) {
      expect(r.norm).toBeCloseTo(want, 5);
      expect(r.refused).toMatch(/OptimizerError: clipGradNorm: gradient 0 is split over the ranks \[0,1\]/);
    }
  }, 90_000);
});
