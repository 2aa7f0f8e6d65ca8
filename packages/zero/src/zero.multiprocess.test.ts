import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runWorld } from './test/run-world.js';

interface RankResult {
  rank: number;
  maxDiff: number;
  hash: string;
  tensorGrowth?: number;
  stateBytes?: number;
  fullStateBytes?: number;
  consolidatedDiff?: number;
  consolidatedEntries?: number;
  stateDictOffTarget?: string;
  resumedAt?: number;
}

const TIMEOUT = 90_000;

function expectSameParamsEverywhere(ranks: RankResult[], tol: number): void {
  expect(new Set(ranks.map((r) => r.hash)).size).toBe(1);
  for (const r of ranks) expect(r.maxDiff).toBeLessThan(tol);
}

describe('ZeroRedundancyOptimizer across real processes, against one process with the full optimizer', () => {
  const cases = [
    { stage: 1, opt: 'adam', n: 2, bucket: false },
    { stage: 1, opt: 'adamw', n: 3, bucket: true },
    { stage: 2, opt: 'adam', n: 3, bucket: false },
    { stage: 2, opt: 'adamw', n: 2, bucket: true },
  ];
  it.each(cases)('stage $stage, $opt, $n ranks, bucket view $bucket: same parameters after 20 steps (1e-6), state ≈ 1/N', async ({ stage, opt, n, bucket }) => {
    const args = ['--stage', `${stage}`, '--opt', opt, '--steps', '20', '--mode', 'even', ...(bucket ? ['--bucket'] : [])];
    const ranks = await runWorld<RankResult>('./zero.child.ts', n, args, TIMEOUT);
    expectSameParamsEverywhere(ranks, 1e-6);
    const full = ranks[0]!.fullStateBytes!;
    expect(full).toBeGreaterThan(0);
    // the six equal layers split evenly: each rank holds exactly 1/N of the optimizer state
    expect(ranks.reduce((s, r) => s + r.stateBytes!, 0)).toBe(full);
    for (const r of ranks) expect(r.stateBytes!).toBeLessThanOrEqual((full / n) * 1.1);
    for (const r of ranks) expect(r.tensorGrowth).toBe(0);
  }, TIMEOUT + 10_000);

  it.each([
    { stage: 1, n: 3 },
    { stage: 2, n: 2 },
  ])('uneven inputs (rank r gets 5 + r batches) under join, stage $stage, $n ranks: identical parameters, as divideByInitialWorldSize prescribes', async ({ stage, n }) => {
    const ranks = await runWorld<RankResult>('./zero.child.ts', n, ['--stage', `${stage}`, '--opt', 'adam', '--mode', 'uneven'], TIMEOUT);
    expectSameParamsEverywhere(ranks, 1e-6);
  }, TIMEOUT + 10_000);

  it('with DDP (@ddp/reducer) for the gradients, stage 1, Adam, 2 ranks: same parameters as one process after 20 steps', async () => {
    const ranks = await runWorld<RankResult>('./zero.child.ts', 2, ['--stage', '1', '--opt', 'adam', '--steps', '20', '--ddp'], TIMEOUT);
    expectSameParamsEverywhere(ranks, 1e-6);
  }, TIMEOUT + 10_000);

  it('DDP + ZeRO under join with uneven inputs finishes with identical parameters on every rank', async () => {
    const ranks = await runWorld<RankResult>('./zero.child.ts', 3, ['--stage', '1', '--opt', 'adam', '--mode', 'uneven', '--ddp'], TIMEOUT);
    expect(new Set(ranks.map((r) => r.hash)).size).toBe(1);
  }, TIMEOUT + 10_000);

  // Needs @ddp/reducer's join hook to write the averaged gradients into a joined rank's .grad
  // (today only active ranks get them, as in PyTorch): a joined rank's ZeRO then steps its
  // shard with stale gradients and the result is off by ~1e-2. The GradAverager case above
  // shows what ZeRO does once the gradients are there.
  it.skip('DDP + ZeRO under join with uneven inputs equals what divideByInitialWorldSize prescribes', async () => {
    const ranks = await runWorld<RankResult>('./zero.child.ts', 3, ['--stage', '1', '--opt', 'adam', '--mode', 'uneven', '--ddp'], TIMEOUT);
    expectSameParamsEverywhere(ranks, 1e-6);
  }, TIMEOUT + 10_000);

  it('consolidateStateDict gathers the full state on rank 0; a checkpoint through @ddp/nn restores every shard', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'zero-ckpt-'));
    try {
      const ranks = await runWorld<RankResult>('./zero.child.ts', 3, ['--stage', '1', '--opt', 'adam', '--steps', '20', '--mode', 'checkpoint', '--dir', dir], TIMEOUT);
      expect(ranks[0]!.consolidatedEntries).toBe(12);
      expect(ranks[0]!.consolidatedDiff).toBeLessThan(1e-6);
      expect(ranks.slice(1).map((r) => r.stateDictOffTarget)).toEqual(['ZeroError', 'ZeroError']);
      expect(ranks.map((r) => r.resumedAt)).toEqual([10, 10, 10]);
      expectSameParamsEverywhere(ranks, 1e-6);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, TIMEOUT + 10_000);
});
