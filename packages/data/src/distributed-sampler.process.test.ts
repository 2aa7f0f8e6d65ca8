import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const script = fileURLToPath(new URL('./fixtures/sampler-rank.ts', import.meta.url));

describe('DistributedSampler across processes', () => {
  it('3 processes over 10 samples: each epoch covers the dataset, orders change per epoch', async () => {
    const worldSize = 3;
    const outputs = await Promise.all(
      Array.from({ length: worldSize }, (_, rank) =>
        run(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
          env: { ...process.env, RANK: String(rank), WORLD_SIZE: String(worldSize), DATASET_LENGTH: '10' },
          timeout: 30_000,
        }),
      ),
    );
    const perRank = outputs.map((o) => JSON.parse(o.stdout) as number[][]);
    for (let epoch = 0; epoch < 3; epoch++) {
      const shares = perRank.map((epochs) => epochs[epoch]!);
      for (const s of shares) expect(s).toHaveLength(4);
      const all = shares.flat();
      expect(new Set(all).size).toBe(10);
      // 12 slots for 10 samples: two samples appear twice (the padding).
      expect(all).toHaveLength(12);
    }
    expect(perRank[0]![1]).not.toEqual(perRank[0]![0]);
  });
});
