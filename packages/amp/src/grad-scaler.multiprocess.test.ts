import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

type Steps = [stepped: boolean, scale: number, weightSum: number][];
type UnderJoin = Record<'listed' | 'unlisted', { weights: number; warnings: string[]; scale: number }>;
type RankResult = {
  rank: number;
  refused: string | null;
  refusedOwningNothing: string | null;
  underJoin: UnderJoin;
} & Record<string, Steps>;

describe('GradScaler across 2 real processes: one rank overflows, both skip', () => {
  it('without DDP, with DDP, DDP + fp16/bf16 compression hooks, DDP + ZeRO stage 1, ZeRO stage 2, Adasum; under join', async () => {
    const script = new URL('./test/overflow.child.ts', import.meta.url);
    const [r0, r1] = (await runWorld<RankResult>({ script, nprocs: 2, timeoutMs: 90_000 })).results as [
      RankResult,
      RankResult,
    ];
    for (const r of [r0, r1]) {
      expect(r.refused).toMatch(/^GradScalerError: unscale_\(\): param group 0's parameter \d has its gradient split/);
      expect(r.refused).toMatch(/over the ranks \[0,1\] .*and no processGroup/);
      // the rank that owns no parameter (so holds no gradient) refuses alike (was: "no parameter has a gradient")
      expect(r.refusedOwningNothing).toMatch(/^GradScalerError: .*split over the ranks \[0,1\] .*and no processGroup/);
      // under join with uneven inputs the joined rank shadows the scaler's all-reduce (was: CollectiveMismatchError)
      expect(r.underJoin.listed.warnings).toEqual([]);
      expect(r.underJoin.unlisted.warnings).toHaveLength(1);
      expect(r.underJoin.unlisted.warnings[0]).toMatch(/not among join's joinables.*join\(\[ddp, scaler, optimizer\]/);
    }
    expect(r0.underJoin.listed.weights).toBe(r1.underJoin.listed.weights);
    // the joined rank follows the scale of the steps it shadowed (was: 4096 where rank 0 had 8192, then drift)
    expect([r0.underJoin.listed.scale, r1.underJoin.listed.scale]).toEqual([8192, 8192]);
    for (const setting of ['alone', 'ddp', 'ddpFp16Hook', 'ddpBf16Hook', 'zero', 'zero2', 'adasum']) {
      const [a, b] = [r0[setting], r1[setting]];
      // step 2 overflowed on rank 1 only: both skipped it and backed off; growth every 2 clean steps
      const initial = setting === 'ddpFp16Hook' ? 256 : 1024;
      const want = [
        [true, initial],
        [true, 2 * initial],
        [false, initial],
        [true, initial],
        [true, 2 * initial],
      ];
      expect(
        a.map(([stepped, scale]) => [stepped, scale]),
        `${setting} rank 0`,
      ).toEqual(want);
      expect(
        b.map(([stepped, scale]) => [stepped, scale]),
        `${setting} rank 1`,
      ).toEqual(want);
      for (const steps of [a, b])
        expect(steps[2][2], `${setting}: a skipped step leaves the weights`).toBe(steps[1][2]);
      if (setting !== 'alone')
        expect(
          a.map((s) => s[2]),
          `${setting}: replicas stay equal`,
        ).toEqual(b.map((s) => s[2]));
    }
  }, 120_000);
});
