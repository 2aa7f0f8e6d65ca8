import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

// probe CH: no gradient reaches token ids, so the reduce-scatter a resharded unit starts from its input's
// backward never started, and every rank raised "weight of the unit Embedding got gradient after the unit's
// reduce-scatter" after the first backward (torch FSDP2 trains these models)
describe('fullyShard over a model whose input is token ids', () => {
  it.each(['root', 'units'])(
    'wrapped at the %s: 2 ranks equal one process on the global batch',
    async (wrapping) => {
      const { results } = await runWorld<{ maxDiff: number; error: string | null }>({
        script: new URL('./test/token-input.child.ts', import.meta.url),
        nprocs: 2,
        args: [wrapping],
        timeoutMs: 60_000,
      });
      for (const r of results) expect(r).toEqual({ maxDiff: expect.any(Number), error: null });
      for (const r of results) expect(r.maxDiff).toBeLessThan(1e-6);
    },
    90_000,
  );
});
