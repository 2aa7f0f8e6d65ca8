import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { batchRows, loadGolden } from './test/golden.js';

interface RankResult {
  y: number[];
  dx: number[];
  dweight: number[];
  dbias: number[];
  runningMean: number[];
  runningVar: number[];
  leaked: number;
  evalLeaked: number;
  evalY: number[];
  evalRunningMean: number[];
  evalRunningVar: number[];
  syncForwardError: string;
  oneValue: string;
  oneD: Record<string, number>;
  evalRefused: string;
  untracked: number | string;
  outsideGroup: number | string;
}

/**
 * Within 1e-4 relative and 1e-5, or (`float32Error`) no further off than 1.5× torch's own float32 result
 * or one float32 ulp of the largest value, whichever is more.
 */
function expectClose(actual: number[], expected: number[], what: string, float32Error?: number): void {
  expect(actual.length, what).toBe(expected.length);
  if (float32Error !== undefined) {
    const error = Math.max(...actual.map((a, i) => Math.abs(a - expected[i])));
    const ulp = 2 ** (Math.floor(Math.log2(Math.max(...expected.map(Math.abs)))) - 23);
    expect(error, `${what}: beyond torch's float32 error`).toBeLessThanOrEqual(
      Math.max(1.5 * float32Error, ulp) + 1e-6,
    );
    return;
  }
  const worst = Math.max(0, ...actual.map((a, i) => Math.abs(a - expected[i]) - 1e-4 * Math.abs(expected[i])));
  expect(worst, `${what}: worst error beyond 1e-4 relative`).toBeLessThan(1e-5);
}

/** Eval-mode output of BatchNorm with the given running stats (what every rank must compute locally). */
function evalReference(
  x: number[],
  channels: number,
  plane: number,
  mean: number[],
  variance: number[],
  w: number[],
  b: number[],
): number[] {
  return x.map((v, i) => {
    const c = Math.floor(i / plane) % channels;
    return ((v - mean[c]) / Math.sqrt(variance[c] + 1e-5)) * w[c] + b[c];
  });
}

const cases: [string, number[]][] = [
  ['batchnorm2d_n4_c3', [2, 2]],
  ['batchnorm2d_n4_c3', [0, 4]],
  ['batchnorm2d_n4_c3', [1, 0, 3]],
  ['batchnorm2d_n6_c2', [2, 2, 2]],
  ['batchnorm2d_n6_c2', [3, 1, 2]],
  // channels near 1e4: each rank's float32 mean was 5–10 ulps off (torch's pairwise sums: 1)
  ['batchnorm2d_far_from_zero', [10, 6]],
];

describe('SyncBatchNorm over real ranks reproduces PyTorch BatchNorm2d on the whole batch', () => {
  it.each(cases)(
    '%s split %j',
    async (name, split) => {
      const g = loadGolden(name);
      const { results: ranks } = await runWorld<RankResult>({
        script: new URL('./test/syncbn.child.ts', import.meta.url),
        nprocs: split.length,
        args: [name, split.join(',')],
      });
      const [, channels, h, w] = g.inputs.x.shape as [number, number, number, number];
      let start = 0;
      for (const [rank, r] of ranks.entries()) {
        const n = split[rank];
        const at = `rank ${rank} (${n} rows)`;
        expectClose(r.y, batchRows(g.outputs.y, start, n), `${at} y`, g.float32_error?.y);
        expectClose(r.dx, batchRows(g.outputs.dx, start, n), `${at} dx`, g.float32_error?.dx);
        expectClose(r.runningMean, g.outputs.running_mean.data, `${at} running_mean`, g.float32_error?.running_mean);
        expectClose(r.runningVar, g.outputs.running_var.data, `${at} running_var`);
        // Every rank's loss is its share of the whole batch's, so DDP's average is 1/N of PyTorch's gradient.
        // Far from zero dweight is ill-conditioned (a half-ulp shift of the mean moves it by torch's own 1e-2).
        if (!g.float32_error)
          expectClose(
            r.dweight.map((v) => v * split.length),
            g.outputs.dweight.data,
            `${at} dweight`,
          );
        expectClose(
          r.dbias.map((v) => v * split.length),
          g.outputs.dbias.data,
          `${at} dbias`,
        );
        expect(r.leaked, `${at} tensors leaked per step`).toBe(0);
        expect(r.evalLeaked, `${at} tensors leaked per eval forwardAsync`).toBe(0);
        const x = batchRows(g.inputs.x, start, n);
        const wt = g.inputs.weight.data;
        const bs = g.inputs.bias.data;
        expectClose(
          r.evalY,
          evalReference(x, channels, h * w, r.evalRunningMean, r.evalRunningVar, wt, bs),
          `${at} eval y`,
        );
        expect(r.syncForwardError, `${at}: synchronous forward in training`).toBe('SyncBatchNormError');
        // was: no error, and an output of 0 whatever the value
        expect(r.oneValue, `${at}: one value per channel over the group`).toMatch(
          new RegExp(`rank ${rank}: SyncBatchNorm expected more than 1 value per channel when training, got 1 over`),
        );
        // was: SyncBatchNormError from forward, and forwardAsync normalised by every rank's batch together
        expect({ untracked: r.untracked }, `${at}: eval without running stats vs local BatchNorm2d`).toEqual({
          untracked: expect.closeTo(0, 6),
        });
        expect({ outsideGroup: r.outsideGroup }, `${at}: processGroup null vs local BatchNorm1d`).toEqual({
          outsideGroup: expect.closeTo(0, 6),
        });
        expect(r.evalRefused, `${at}: eval() before forwardAsync is awaited`).toBe('ModuleError');
        for (const [what, d] of Object.entries(r.oneD))
          expect(d, `${at}: 1d ${what} vs BatchNorm1d on the whole batch`).toBeLessThan(1e-5);
        start += n;
      }
    },
    90_000,
  );
});
