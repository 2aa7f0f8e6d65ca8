import { runWorld } from '@ddp/launch/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { PipelineStage } from './index.js';
import { buildParts, freeze, type NamedValues, onFirstOfTwo, paddedRows, rows, wholeBatchRun } from './test/model.js';

type Outcome = { params: NamedValues; losses: (number | null)[] } | { error: string };
type Case = 'padded' | 'sum' | 'frozenFirst' | 'skipped';
const STEPS = 3;
let ranks: { rank: number; cases: Record<Case, Outcome> }[];

beforeAll(async () => {
  ({ results: ranks } = await runWorld({
    script: new URL('./test/loss.child.ts', import.meta.url),
    nprocs: 2,
    env: { DDP_HEARTBEAT_MS: '0' },
    timeoutMs: 90_000,
  }));
}, 100_000);

const maxAbsDiff = (a: number[], b: number[]) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

/** Both stages' weights and the last stage's losses against the whole model trained on the whole batch. */
function expectWholeBatch(name: Case, reference: Awaited<ReturnType<typeof wholeBatchRun>>): void {
  for (const { rank, cases } of ranks) {
    const outcome = cases[name];
    if ('error' in outcome) throw new Error(`rank ${rank}: ${outcome.error}`);
    for (const [param, values] of Object.entries(outcome.params))
      expect(maxAbsDiff(values, reference.params[param]), `${param} on rank ${rank}`).toBeLessThan(1e-5);
    if (rank === 1) expect(maxAbsDiff(outcome.losses as number[], reference.losses)).toBeLessThan(1e-5);
  }
}

describe('pipelineStep on 2 stages weights micro-batches by what the loss reduces over', () => {
  // before: weighted by target rows (the probe: loss 2.29914 for 2.27044); here embedding.weight 5.2e-3 off
  it("'mean' crossEntropy with -100 padding: the whole batch's mean over real tokens, and its gradients", async () => {
    expectWholeBatch('padded', await wholeBatchRun(new PipelineStage(buildParts(), 0, 1), paddedRows, STEPS));
  }, 60_000);

  // before: each micro-batch's sum scaled by its share, half the sum (12.918 for 25.837)
  it("lossReduction 'sum': the whole batch's sum (as torch's Pipe), and its gradients", async () => {
    const whole = new PipelineStage(buildParts('sum'), 0, 1);
    expectWholeBatch('sum', await wholeBatchRun(whole, (s) => rows(s, 0, 4), STEPS));
  }, 60_000);

  // before: AutogradArgumentError "backward() on a tensor that does not require grad" on stage 0
  it('a first stage with nothing trainable skips its backward; the last stage trains as the whole model', async () => {
    const whole = new PipelineStage(buildParts(), 0, 1);
    freeze(whole, onFirstOfTwo);
    const reference = await wholeBatchRun(whole, (s) => rows(s, 0, 4), STEPS);
    expectWholeBatch('frozenFirst', reference);
    for (const [name, values] of Object.entries(reference.params))
      if (onFirstOfTwo(name)) expect(values).toEqual(reference.initial[name]);
  }, 60_000);

  // before: both stages returned normally, micro-batch 1's gradient dropped
  it('hand-written schedules that skip a backward: ScheduleError on both stages', () => {
    for (const { rank, cases } of ranks)
      expect('error' in cases.skipped ? cases.skipped.error : 'no error', `rank ${rank}`).toMatch(
        /^ScheduleError: pipeline schedule incomplete: stage 0 never backwards micro-batch 1/,
      );
  });
});
