import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const script = fileURLToPath(new URL('./fixtures/sampler-rank.ts', import.meta.url));
const commReady = typeof ((await import('@ddp/comm')) as Record<string, unknown>).initProcessGroup === 'function';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

interface RankOutput {
  rank: number;
  numReplicas: number;
  epochs: number[][];
}

async function world(worldSize: number, n: number, env: Record<string, string>): Promise<RankOutput[]> {
  const outputs = await Promise.all(
    Array.from({ length: worldSize }, (_, rank) =>
      run(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
        env: { ...process.env, ...env, RANK: String(rank), WORLD_SIZE: String(worldSize), DATASET_LENGTH: String(n) },
        timeout: 45_000,
      }),
    ),
  );
  return outputs.map((o) => JSON.parse(o.stdout) as RankOutput);
}

function expectPartition(perRank: RankOutput[], n: number): void {
  const worldSize = perRank.length;
  const perRankCount = Math.ceil(n / worldSize);
  for (let epoch = 0; epoch < 3; epoch++) {
    const shares = perRank.map((r) => r.epochs[epoch]!);
    for (const s of shares) expect(s).toHaveLength(perRankCount);
    const all = shares.flat();
    expect(new Set(all).size).toBe(n);
    expect(all).toHaveLength(perRankCount * worldSize);
  }
  expect(perRank[0]!.epochs[1]).not.toEqual(perRank[0]!.epochs[0]);
}

describe('DistributedSampler across processes', () => {
  it('3 processes, explicit ranks, 10 samples: each epoch covers the dataset once plus padding', async () => {
    const out = await world(3, 10, {});
    expectPartition(out, 10);
  });

  it.skipIf(!commReady)('rank and world size default to the process group (3 ranks over 7 samples)', async () => {
    const env = { MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(await freePort()), DDP_SECRET: randomBytes(16).toString('hex') };
    const out = await world(3, 7, env);
    expect(out.map((o) => [o.rank, o.numReplicas])).toEqual([
      [0, 3],
      [1, 3],
      [2, 3],
    ]);
    expectPartition(out, 7);
  });
});
