import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript as child } from './child-script.js';

/**
 * An optimizer built before a wrapper replaced the model's parameters (fullyShard, as
 * applyTensorParallel in tp's apply.test.ts): it held disposed parameters, which got no gradient
 * and were skipped, so nothing trained. @ddp/nn's Optimizer.step now refuses a disposed parameter.
 */
describe('silent wrong results: an optimizer over replaced parameters', () => {
  it('fsdp: an optimizer built before fullyShard raises OptimizerError at the step, nothing moves', async () => {
    const run = await runWorld<{ rank: number; error: string | null; moved: boolean }>({
      script: child('fsdp-early-optimizer.child.ts'),
      nprocs: 2,
    });
    for (const r of run.results) {
      // before: no error, and no weight moved
      // and it says what to step over (it advised model.parameters(), what the user had done)
      expect(r.error ?? 'no error', `rank ${r.rank}`).toMatch(
        /^OptimizerError: step: parameter 0 of group 0 is freed: fsdp: .* step the optimizer over FSDPModule/,
      );
      expect(r.moved, `rank ${r.rank}`).toBe(false);
    }
  }, 90_000);
});
