// Test-only assertions on rank results.
import { expect } from 'vitest';
import type { ScenarioResult, WorldResult } from './run-ranks.js';

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

/** Every named array within tol of the reference's. */
export function expectParamsClose(
  got: Record<string, number[] | null>,
  want: Record<string, number[] | null>,
  tol: number,
): void {
  expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
  for (const [name, values] of Object.entries(want)) {
    if (values === null) expect(got[name], name).toBeNull();
    else expect(maxAbsDiff(got[name]!, values), name).toBeLessThan(tol);
  }
}

/** The scenario's result on every rank, failing with the rank's error or stderr when missing. */
export function resultsOf(world: WorldResult, scenario: string): ScenarioResult[] {
  return world.map((rank, r) => {
    const result = rank[scenario];
    if (!result) throw new Error(`rank ${r} printed no result for ${scenario}: ${JSON.stringify(rank.__exit)}`);
    return result;
  });
}

/** Like resultsOf, and none of them is an error. */
export function okResultsOf(world: WorldResult, scenario: string): ScenarioResult[] {
  const results = resultsOf(world, scenario);
  results.forEach((r, rank) => {
    expect(r.error, `rank ${rank}: ${r.error?.message}`).toBeUndefined();
  });
  return results;
}
