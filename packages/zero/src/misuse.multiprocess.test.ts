import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

/** Mistakes with ZeroRedundancyOptimizer that gave wrong parameters without an error. */
interface RankResult {
  rank: number;
  error: { name: string; message: string } | null;
  unchanged: boolean;
  sum: number;
  /** Parameters still marked as gradient shards at the end (after dispose in 'dispose'). */
  marked: number;
  lrs: number[];
}

const script = new URL('./test/misuse.child.ts', import.meta.url);
type Init =
  | 'alike'
  | 'per-rank'
  | 'unfrozen'
  | 'branch'
  | 'one-rank'
  | 'add-group'
  | 'layout'
  | 'dispose'
  | 'in-ddp'
  | 'early-stop'
  | 'join-first'
  | 'join-divide'
  | 'bad-group';
const run = async (stage: number, init: Init, backwards = 1) =>
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

  it('stage 2, a parameter only one rank uses (another size): the ZeroError saying why, in the backward', async () => {
    // before: comm's CollectiveMismatchError (reduce of count 4 against count 3), naming no parameter or cause
    for (const r of await run(2, 'one-rank')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(
        new RegExp(`^rank ${r.rank}: stage 2's gradient reduces differ between ranks \\(.*called allReduce`),
      );
      expect(r.error?.message).toMatch(/a parameter got no gradient on some ranks/);
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

  it.each([1, 2])(
    'stage %i, a param group added after construction: refused on every rank',
    async (stage) => {
      // before: the group was listed but never stepped (the partition and local optimizer are built once)
      for (const r of await run(stage, 'add-group')) {
        expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
        expect(r.error?.message).toMatch(/addParamGroup: ZeroRedundancyOptimizer cannot take a param group after/);
        expect(r.unchanged).toBe(true);
      }
    },
    90_000,
  );

  it('a state dict of another grouping: refused on every rank before anything changes', async () => {
    // before: a rank whose own parameters' shapes happened to fit loaded it (mapped wrongly), the other raised,
    // and every rank had taken the dict's hyperparameters (lr 0.5) first
    for (const r of await run(1, 'layout')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(/state 'expAvg' of parameter 1 has shape \[6\], the parameter \[2,6\]/);
      expect(r.lrs).toEqual([0.01, 0.01]);
    }
  }, 90_000);

  it('stage 2 over a model DDP already reduces: refused when made (was: an untyped TypeError in the backward)', async () => {
    for (const r of await run(2, 'in-ddp')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('ZeroError');
      expect(r.error?.message).toMatch(/ZeroRedundancyOptimizer stage 2 \(rank \d\): parameter 0, .* already belong/);
      expect(r.error?.message).toMatch(/to another live wrapper \(DistributedDataParallel.create/);
    }
  }, 90_000);

  it('stage 2 under join with throwOnEarlyTermination: the error on every rank, then the group still works', async () => {
    // before: the reduces went out before the join notice was read; the next collective met one
    for (const r of await run(2, 'early-stop')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('EarlyTerminationError');
      expect(r.sum, `rank ${r.rank}: an all-reduce after it`).toBe(3);
      expect(r.unchanged, `rank ${r.rank}: a finite step after it`).toBe(false);
    }
  }, 90_000);

  it('stage 2, a rank joining before its first step: typed errors on every rank at once, then the group works', async () => {
    // before: the joined rank raised alone; its next collective met the active rank's reduce (a mismatch)
    const [joined, active] = await run(2, 'join-first');
    expect(joined.error?.name).toBe('ZeroError');
    expect(joined.error?.message).toMatch(/^rank 0: joined before its first step/);
    expect(active.error?.name).toBe('JoinShadowError');
    expect(active.error?.message).toMatch(/^join: rank 1 is active, and a rank that joined cannot shadow/);
    for (const r of [joined, active]) {
      expect(r.sum, `rank ${r.rank}: an all-reduce after it`).toBe(3);
      expect(r.unchanged, `rank ${r.rank}: a finite step after it`).toBe(false);
    }
  }, 90_000);

  it('stage 2 under join with divideByInitialWorldSize: false: refused on every rank at once, then the group works', async () => {
    // before: only the joined rank raised; the active one waited out its timeout in its next step (probe DB)
    const [joined, active] = await run(2, 'join-divide');
    expect(joined.error?.name).toBe('ZeroError');
    expect(joined.error?.message).toMatch(/^rank 0: stage 2 averages gradients over the initial world size/);
    expect(active.error?.name).toBe('JoinShadowError');
    for (const r of [joined, active]) {
      expect(r.sum, `rank ${r.rank}: an all-reduce after it`).toBe(3);
      expect(r.unchanged, `rank ${r.rank}: a finite step after it`).toBe(false);
    }
  }, 90_000);

  it('a group with an invalid value: refused on every rank when made (was: only on the rank owning it)', async () => {
    for (const r of await run(1, 'bad-group')) {
      expect(r.error?.name, `rank ${r.rank}`).toBe('OptimizerError');
      expect(r.error?.message).toMatch(/Adam parameter group 1: invalid learning rate NaN/);
    }
  }, 90_000);

  it('stage 2 disposed: its parameters are no longer marked as gradient shards', async () => {
    // before: the marks outlived it, so clipGradNormDistributed of DDP's whole gradients summed them over the
    // ranks: a norm √N too large
    for (const r of await run(2, 'alike')) expect(r.marked, `rank ${r.rank}`).toBe(4);
    for (const r of await run(2, 'dispose')) {
      expect(r.error, `rank ${r.rank}`).toBeNull();
      expect(r.marked, `rank ${r.rank}`).toBe(0);
    }
  }, 90_000);
});
