import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface RankResult {
  rank: number;
  error: { name: string; message: string } | null;
}
const run = async (mode: 'throw' | 'shadow') =>
  (
    await runWorld<RankResult>({
      script: new URL('./test/join.child.ts', import.meta.url),
      nprocs: 2,
      args: [mode],
      timeoutMs: 60_000,
    })
  ).results;

describe('SyncBatchNorm inside DDP under join, rank r taking 2 + r batches', () => {
  it('with throwOnEarlyTermination: EarlyTerminationError on both ranks at the third forward', async () => {
    // before: rank 0 raised at once; rank 1 sat in SyncBatchNorm's all-gather until the 20 s timeout
    for (const r of await run('throw'))
      expect(r.error?.name, `rank ${r.rank}: ${r.error?.message}`).toBe('EarlyTerminationError');
  }, 70_000);

  it('without it: typed errors, and the joined rank is told its collectives are not shadowed', async () => {
    // SyncBatchNorm's collectives have no join hook (torch documents it unsupported under join)
    const [joined, active] = await run('shadow');
    expect(active.error?.name).toBe('CollectiveMismatchError');
    expect(joined.error?.name).toBe('DDPCommError');
    // before: it advised wrapping the loop in join, which it already ran under
    expect(joined.error?.message).toContain('The loop runs under join, which shadows the collectives of its joinables');
  }, 70_000);
});
