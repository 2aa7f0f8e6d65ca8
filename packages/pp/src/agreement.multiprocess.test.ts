import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { CFG } from './test/model.js';

describe('the stages of a pipeline agree on what they pass before running', () => {
  // 1F1B: the last stage read the next step's first activation as its 4th micro-batch, weighted
  // its losses by 1/4, and both stages returned normally; AFAB timed out after 20 s
  it('another micro-batch count or activation shape on one stage: PipelineStageError on every stage, at once', async () => {
    const { results } = await runWorld<{ rank: number; results: Record<string, string> }>({
      script: new URL('./test/mismatch.child.ts', import.meta.url),
      nprocs: 2,
      env: { DDP_HEARTBEAT_MS: '0' },
      timeoutMs: 60_000,
    });
    const n = CFG.numMicroBatches;
    const { microBatch: b, seq, dim } = CFG;
    for (const { rank, results: r } of results) {
      for (const schedule of ['1f1b', 'afab']) {
        expect(r[`${schedule} counts`], `rank ${rank}`).toBe(
          `PipelineStageError: stage ${rank}: pipelineStep: the stages pass different micro-batch counts or ` +
            `activation shapes (stage 0: ${n} of [${b}, ${seq}, ${dim}], stage 1: ${n + 1} of [${b}, ${seq}, ${dim}])`,
        );
        expect(r[`${schedule} shapes`], `rank ${rank}`).toContain(
          `(stage 0: ${n} of [${b}, ${seq}, ${dim}], stage 1: ${n} of [${b}, ${seq}, ${dim + 1}])`,
        );
        expect(r[`${schedule} layout`], `rank ${rank}`).toContain(
          `(stage 0: ${n} of [${b}, ${seq}, ${dim}], stage 1: ${n} of [${seq}, ${b}, ${dim}])`,
        );
      }
      expect(r.agreed).toBe('ok');
    }
  }, 90_000);
});
