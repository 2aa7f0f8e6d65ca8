import { explain, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { expect } from 'vitest';

/** One phase of a rank script that reports `{ phase, name, … }` per step (ok, or the error's name). */
export interface PhaseOutcome {
  phase: string;
  name: string;
  message?: string;
  ranks?: number[];
  value?: unknown;
}

/** The rank's report of phase `p`. */
export const phase = (o: RankOutcome, p: string): PhaseOutcome | undefined =>
  (o.results as PhaseOutcome[]).find((r) => r.phase === p);

/** Runs `script` (beside this folder) on `nprocs` ranks with `mode` as its argument. */
export const runPhases = (script: string, nprocs: number, mode: string, timeoutMs: number) =>
  spawnRanks({ nprocs, script: new URL(`./${script}`, import.meta.url), args: [mode], timeoutMs });

/** Every rank ended normally, its collective and the call after it both a CollectiveMismatchError. */
export function expectMismatchOnEveryRank(out: RankOutcome[]): void {
  expect(
    out.every((o) => o.code === 0),
    explain(out),
  ).toBe(true);
  for (const o of out) {
    expect(phase(o, 'collective')?.name, explain(out)).toBe('CollectiveMismatchError');
    expect(phase(o, 'after')?.name).toBe('CollectiveMismatchError');
  }
}
