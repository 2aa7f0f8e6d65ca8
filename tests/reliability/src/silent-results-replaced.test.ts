import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript as child } from './child-script.js';

/**
 * An optimizer built before a wrapper replaced the model's parameters (fullyShard, as
 * applyTensorParallel in tp's apply.test.ts): it held disposed parameters, which got no gradient
 * and were skipped, so nothing trained. @ddp/nn's Optimizer.step now refuses a disposed parameter.
 */
describe('silent wrong results: an optimizer over replaced parameters', () => {
  it('fsdp: an optimizer built before fullyShard raises OptimizerError at the step, nothing moves; a clip over those parameters too', async () => {
    type Result = { rank: number; error: string | null; moved: boolean; clip: string; clipDistributed: string };
    const run = await runWorld<Result>({
      script: child('fsdp-early-optimizer.child.ts'),
      nprocs: 2,
    });
    for (const r of run.results) {
      // before: no error, and no weight moved
      // and it says what to step over (it advised model.parameters(), what the user had done)
      expect(r.error ?? 'no error', `rank ${r.rank}`).toMatch(
        /^OptimizerError: step: parameter 0 of group 0 is freed: fsdp: .* step the optimizer and clip .* FSDPModule/,
      );
      expect(r.moved, `rank ${r.rank}`).toBe(false);
      // before: each returned 0 and clipped nothing (probe AJ)
      expect(r.clip, `rank ${r.rank}`).toMatch(/^OptimizerError: clipGradNorm: parameter 0 is freed: fsdp: .* clip/);
      expect(r.clipDistributed, `rank ${r.rank}`).toMatch(
        /^OptimizerError: clipGradNormDistributed: parameter 0 is freed/,
      );
    }
  }, 90_000);
});

/**
 * FSDP's shards given to what averages replicas (probe AD): ZeRO's first-step check took the parts
 * for differing replicas and advised broadcasting rank 0's (one part over the other); DDP failed
 * untyped given its root; Adasum refused already. Each is now refused when made, on every rank.
 */
describe("FSDP's shards under a wrapper of replicas", () => {
  it('fsdp: DDP, ZeRO and AdasumOptimizer over its root are refused on every rank, naming the shard', async () => {
    const run = await runWorld<{ rank: number; errors: Record<string, string | null> }>({
      script: child('fsdp-under-replica-wrappers.child.ts'),
      nprocs: 2,
    });
    for (const { rank, errors } of run.results) {
      expect(errors.ddp ?? 'no error', `rank ${rank}`).toMatch(
        /^DDPUsageError: DistributedDataParallel.create: parameter 0.weight is freed \(fsdp: .*\); FSDP reduces/,
      );
      expect(errors.ddpOverRoot ?? 'no error', `rank ${rank}`).toMatch(
        /^DDPUsageError: DistributedDataParallel.create: the module \(FSDPModule\) is not an nn Module: FSDP reduces/,
      );
      expect(errors.zero ?? 'no error', `rank ${rank}`).toMatch(/^ZeroError: .* parameter 0 is a shard .*\(FSDP's/);
      expect(errors.adasum ?? 'no error', `rank ${rank}`).toMatch(/^AdasumError: .* parameter 0 is a shard/);
    }
  }, 90_000);
});
