import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

const commReady = typeof ((await import('@ddp/comm')) as Record<string, unknown>).initProcessGroup === 'function';

interface RankOutput {
  rank: number;
  numReplicas: number;
  epochs: number[][];
}

async function world(worldSize: number, n: number, env: Record<string, string>): Promise<RankOutput[]> {
  const script = new URL('./test/sampler-rank.child.ts', import.meta.url);
  const { results } = await runWorld<RankOutput>({
    script,
    nprocs: worldSize,
    env: { ...env, DATASET_LENGTH: String(n) },
    timeoutMs: 45_000,
  });
  return results;
}

function expectPartition(perRank: RankOutput[], n: number): void {
  const worldSize = perRank.length;
  const perRankCount = Math.ceil(n / worldSize);
  for (let epoch = 0; epoch < 3; epoch++) {
    const shares = perRank.map((r) => r.epochs[epoch]);
    for (const s of shares) expect(s).toHaveLength(perRankCount);
    const all = shares.flat();
    expect(new Set(all).size).toBe(n);
    expect(all).toHaveLength(perRankCount * worldSize);
  }
  expect(perRank[0].epochs[1]).not.toEqual(perRank[0].epochs[0]);
}

describe('DistributedSampler across processes', () => {
  it('3 processes, explicit ranks, 10 samples: each epoch covers the dataset once plus padding', async () => {
    const out = await world(3, 10, {});
    expectPartition(out, 10);
  });

  it.skipIf(!commReady)('rank and world size default to the process group (3 ranks over 7 samples)', async () => {
    const out = await world(3, 7, { WITH_GROUP: '1' });
    expect(out.map((o) => [o.rank, o.numReplicas])).toEqual([
      [0, 3],
      [1, 3],
      [2, 3],
    ]);
    expectPartition(out, 7);
  });
});
