import { beforeAll, describe, expect, it } from 'vitest';
import { expectParamsClose, okResultsOf, resultsOf } from './test/expect.js';
import { runWorld, type WorldResult } from './test/run-ranks.js';

type Params = Record<string, number[]>;

describe('uneven inputs and failures on real processes', () => {
  let three: WorldResult;
  let barrier: WorldResult;
  let exit: WorldResult;
  let divergent: WorldResult;
  beforeAll(async () => {
    // worlds whose group ends poisoned run alone; a short collective timeout bounds any hang
    const env = { DDP_TIMEOUT_MS: '15000' };
    [three, barrier, exit, divergent] = await Promise.all([
      runWorld(3, ['joinInitial', 'joinActive', 'shapeMismatch', 'nonFinite'], 150_000, env),
      runWorld(2, ['unevenWithoutJoin'], 150_000, env),
      runWorld(2, ['unevenExit'], 150_000, env),
      runWorld(2, ['unusedDivergentError'], 150_000, env),
    ]);
  }, 160_000);

  it('join with 5 + r batches on rank r: every rank ends with the parameters divideByInitialWorldSize prescribes', () => {
    for (const scenario of ['joinInitial', 'joinActive']) {
      const ranks = okResultsOf(three, scenario);
      for (const r of ranks) {
        expectParamsClose(r.params as Params, ranks[0]!.reference as Params, 1e-5);
        expect(r.iterations).toBe(7); // joined ranks shadowed the iterations they had no batch for
      }
    }
    // the two divisors really lead to different models
    const a = okResultsOf(three, 'joinInitial')[0]!.reference as Params;
    const b = okResultsOf(three, 'joinActive')[0]!.reference as Params;
    expect(Math.abs(a['0.weight']![0]! - b['0.weight']![0]!)).toBeGreaterThan(1e-5);
  });

  it('parameter shapes that differ across ranks raise ParameterMismatchError naming the parameter and ranks, on every rank', () => {
    for (const r of resultsOf(three, 'shapeMismatch')) {
      expect(r.error?.name).toBe('ParameterMismatchError');
      expect(r.error?.message).toMatch(/"0\.weight" differs between ranks 0 and 1: shape \[8, 5\] on rank 0, \[9, 5\] on rank 1/);
    }
  });

  it('checkFinite names the parameter whose averaged gradient is NaN, on every rank', () => {
    for (const r of resultsOf(three, 'nonFinite')) {
      expect(r.error?.name).toBe('NonFiniteGradientError');
      expect(r.error?.message).toContain('"2.bias" holds NaN');
    }
  });

  it('without join, a rank that runs out of batches and moves on gives typed errors on every rank, not a hang', () => {
    const [r0, r1] = resultsOf(barrier, 'unevenWithoutJoin');
    expect(r0!.error?.name).toBe('CollectiveMismatchError');
    expect(r1!.error?.name).toBe('DDPCommError');
    expect(r1!.error?.message).toMatch(/rank 1, iteration 2\): gradient all-reduce of bucket 0 .* rank 0 called barrier.*join\(\[ddp\]/);
  });

  it('without join, a rank that runs out of batches and exits gives the others a DDPCommError naming it', () => {
    const [r0, r1] = resultsOf(exit, 'unevenExit');
    expect(r0!.error).toBeUndefined();
    expect(r1!.error?.name).toBe('DDPCommError');
    expect(r1!.error?.message).toMatch(/PeerLostError: .*rank 0 has left/);
  });

  it('a parameter without gradient on one rank only (no findUnusedParameters) raises on every rank', () => {
    const [r0, r1] = resultsOf(divergent, 'unusedDivergentError');
    expect(r0!.error?.name).toBe('UnusedParametersError');
    expect(r0!.error?.message).toContain('extra.weight');
    expect(r1!.error?.name).toBe('DDPCommError');
    expect(r1!.error?.message).toContain('findUnusedParameters');
  });
});
