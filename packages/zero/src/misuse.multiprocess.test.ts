import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

/** Mistakes with ZeroRedundancyOptimizer that gave wrong parameters without an error. */
interface RankResult {
  rank: number;
  error: { name: string; message: string } | null;
  unchanged: boolean;
  sum: number;
}

const script = new URL('./test/misuse.child.ts', import.meta.url);
const run = async (stage: number, init: 'alike' | 'per-rank' | 'unfrozen' | 'branch', backwards = 1) =>
  (
    await runWorld<RankResult>({
      script,
      nprocs: 2,
      args: [String(stage), init, String(backwards)],
      timeoutMs: 60_000,
    })
  ).results;

describe('ZeroRedundancyOptimizer misuse raises ZeroError on every rank', () => {
  it.each([1, 2])(
    'stage %i, models seeded per rank and no DDP: the first step names the parameter and ranks, changes nothing',
    async (stage) => {
      // before: both ranks stepped, averaging gradients of two different models, without a word
      for (const r of await run(stage, 'per-rank')) {
        expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
        expect(r.error?.message).toMatch(
          new RegExp(`^rank ${r.rank}: parameter 0 differs between ranks 0 and 1 at the first step`),
        );
        expect(r.unchanged, `rank ${r.rank}: nothing stepped`).toBe(true);
      }
    },
    90_000,
  );

  it('stage 2, two backwards before a step (gradient accumulation): refused in the second backward', async () => {
    // before: the owner's accumulated gradient entered the second average, halving the first micro-batch's share
    for (const r of await run(2, 'alike', 2)) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(
        new RegExp(`^rank ${r.rank}: stage 2 reduced parameter \\d+'s gradient in an earlier backward`),
      );
      expect(r.unchanged, `rank ${r.rank}: nothing stepped`).toBe(true);
    }
  }, 90_000);

  it('stage 2, a layer unfrozen after the optimizer was created: refused at the step, nothing changed', async () => {
    // before: its gradient was never averaged; its owner stepped it with its own gradient alone
    for (const r of await run(2, 'unfrozen')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(
        new RegExp(`^rank ${r.rank}: parameter 0 requires grad but did not when the optimizer was created`),
      );
      expect(r.unchanged, `rank ${r.rank}: nothing stepped`).toBe(true);
    }
  }, 90_000);

  it('stage 2, each rank taking another branch of one shape: refused at the step, nothing changed', async () => {
    // before: head a's reduce on rank 0 met head b's on rank 1 (same size, same owner), so b's owner stepped b by
    // (a's gradient + b's) / 2 and a not at all, silently
    for (const r of await run(2, 'branch')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(
        new RegExp(
          `^rank ${r.rank}: stage 2 reduced the gradients of other parameters on ranks 0 and 1 \\(reduce 0: ` +
            'parameter 3 on rank 0, parameter 5 on rank 1\\)',
        ),
      );
      expect(r.unchanged, `rank ${r.rank}: nothing stepped`).toBe(true);
    }
  }, 90_000);

  it.each([1, 2])(
    'stage %i, models alike, one backward per step: no error, the same parameters everywhere',
    async (stage) => {
      const ranks = await run(stage, 'alike');
      for (const r of ranks) expect(r.error, `rank ${r.rank}`).toBeNull();
      expect(new Set(ranks.map((r) => r.sum)).size).toBe(1);
      expect(ranks[0].unchanged).toBe(false);
    },
    90_000,
  );
});
