import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

// probe CH: no gradient reaches token ids, so the reduce-scatter a resharded unit starts from its input's
// backward never started, and every rank raised "weight of the unit Embedding got gradient after the unit's
// reduce-scatter" after the first backward (torch FSDP2 trains these models); then, beside the ids, a float
// input the unit reads without gradient (a padding mask) raised the same
describe('fullyShard over a model whose input is token ids', () => {
  it.each([
    ['root', 'ids'],
    ['units', 'ids'],
    ['root', 'masked'],
    ['units', 'masked'],
  ])(
    'wrapped at the %s, inputs %s: 2 ranks equal one process on the global batch',
    async (wrapping, inputs) => {
      const { results } = await runWorld<{ maxDiff: number; error: string | null }>({
        script: new URL('./test/token-input.child.ts', import.meta.url),
        nprocs: 2,
        args: [wrapping, inputs],
        timeoutMs: 60_000,
      });
      for (const r of results) expect(r).toEqual({ maxDiff: expect.any(Number), error: null });
      for (const r of results) expect(r.maxDiff).toBeLessThan(1e-6);
    },
    90_000,
  );
});
