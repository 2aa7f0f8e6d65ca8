import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

const script = new URL('./test/frozen.child.ts', import.meta.url);

describe('allReduceGradients across real replicas', () => {
  // before: "1/2" averaged parameter 2's gradient on rank 0 with parameter 1's on rank 1 (the flat buffers had
  // the same size), silently; "-/1" failed with a CollectiveMismatchError about the counts
  it.each(['1/2', '-/1'])(
    'refuses parameters frozen on some replicas only (%s)',
    async (frozen) => {
      const { results } = await runWorld<{ rank: number; error: string | null }>({ script, nprocs: 2, args: [frozen] });
      for (const r of results)
        expect(r.error ?? 'no error', `rank ${r.rank}`).toMatch(
          new RegExp(
            `^PipelineStageError: rank ${r.rank}: allReduceGradients: parameter 1 (requires grad|is frozen) on rank 0`,
          ),
        );
    },
    60_000,
  );

  // before: zeros written into parameter 0's gradient, which weight decay and momentum then stepped
  it('leaves a parameter no replica has a gradient for without one, and averages one some replicas have', async () => {
    const { results } = await runWorld<{ rank: number; error: string | null; grads: (number[] | null)[] }>({
      script,
      nprocs: 2,
      args: ['unused'],
    });
    for (const r of results) expect(r.grads, `rank ${r.rank}`).toEqual([null, [1, 1], [1.5, 1.5]]);
  }, 60_000);

  it('passes the same frozen parameters on every replica', async () => {
    const { results } = await runWorld<{ rank: number; error: string | null }>({ script, nprocs: 2, args: ['1/1'] });
    for (const r of results) expect(r.error, `rank ${r.rank}`).toBeNull();
  }, 60_000);
});
