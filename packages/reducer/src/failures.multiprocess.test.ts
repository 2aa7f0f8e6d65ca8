import { findFreePort } from '@ddp/launch';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectParamsClose, resultsOf } from './test/expect.js';
import { runWorld, type WorldResult } from './test/run-ranks.js';

describe('failures on real processes: typed errors on every rank, no hang', () => {
  let barrier: WorldResult;
  let exit: WorldResult;
  let divergent: WorldResult;
  let earlyTermination: WorldResult;
  let hookFailure: WorldResult;
  beforeAll(async () => {
    // worlds whose group ends poisoned run alone; a short collective timeout bounds any hang
    const env = { DDP_TIMEOUT_MS: '15000' };
    [barrier, exit, divergent, earlyTermination, hookFailure] = await Promise.all([
      runWorld(await findFreePort(), 2, ['unevenWithoutJoin'], 150_000, env),
      runWorld(await findFreePort(), 2, ['unevenExit'], 150_000, env),
      runWorld(await findFreePort(), 2, ['unusedDivergentError'], 150_000, env),
      runWorld(await findFreePort(), 2, ['joinThrow'], 150_000, env),
      runWorld(await findFreePort(), 2, ['hookFailureCaught'], 150_000, env),
    ]);
  }, 160_000);

  it('without join, a rank that runs out of batches and moves on gives typed errors on every rank, not a hang', () => {
    const [r0, r1] = resultsOf(barrier, 'unevenWithoutJoin');
    expect(r0.error?.name).toBe('CollectiveMismatchError');
    expect(r1.error?.name).toBe('DDPCommError');
    expect(r1.error?.message).toMatch(
      /rank 1, iteration 2\): gradient all-reduce of bucket 0 .* rank 0 called barrier.*join\(\[ddp\]/,
    );
  });

  it('without join, a rank that runs out of batches and exits gives the others a DDPCommError naming it', () => {
    const [r0, r1] = resultsOf(exit, 'unevenExit');
    expect(r0.error).toBeUndefined();
    expect(r1.error?.name).toBe('DDPCommError');
    expect(r1.error?.message).toMatch(/PeerLostError: .*rank 0 has left/);
  });

  it('a parameter without gradient on one rank only (no findUnusedParameters) raises on every rank', () => {
    const [r0, r1] = resultsOf(divergent, 'unusedDivergentError');
    expect(r0.error?.name).toBe('UnusedParametersError');
    expect(r0.error?.message).toContain('extra.weight');
    expect(r1.error?.name).toBe('DDPCommError');
    expect(r1.error?.message).toContain('findUnusedParameters');
  });

  it('join with throwOnEarlyTermination: EarlyTerminationError on every rank, the active one from its DDP backward; the group stays usable', () => {
    const [r0, r1] = resultsOf(earlyTermination, 'joinThrow');
    expect(r0.earlyTermination).toBe('EarlyTerminationError');
    expect(r1.earlyTermination).toBe('EarlyTerminationError');
    expect(r1.message).toContain('saw a rank that exhausted its inputs');
    // before: the buckets went out before the notice was read, and the next collective met a bucket's
    expect([r0.sumAfter, r1.sumAfter]).toEqual([3, 3]);
    // two steps after it: as if the failed step had never begun (torch raises in forward)
    type Params = Record<string, number[]>;
    for (const r of [r0, r1]) expectParamsClose(r.params as Params, r0.reference as Params, 1e-5);
  });

  it("a comm hook's collective that fails on one rank, caught there, aborts the group: every later step raises on every rank", () => {
    const [r0, r1] = resultsOf(hookFailure, 'hookFailureCaught') as unknown as {
      steps: string[];
      messages: string[];
    }[];
    expect(r0.steps).toEqual(['ok', 'ok', 'DDPCommError', 'DDPCommError', 'DDPCommError', 'DDPCommError']);
    expect(r1.steps).toEqual(r0.steps);
    expect(r1.messages[0]).toMatch(/InvalidArgumentError: allReduce: unknown reduce op "median"/);
    expect(r0.messages[0]).toMatch(/GroupAbortedError: rank 0: rank 1 aborted process group 0: InvalidArgumentError/);
    for (const m of [...r0.messages.slice(1), ...r1.messages.slice(1)])
      expect(m).toMatch(/refused: the process group failed earlier/);
  });
});
