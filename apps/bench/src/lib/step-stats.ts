// Summaries of the ddp bench's step times for its report: hidden communication, CPU, percentages.
import type { StepTimes } from './ddp-rounds.js';

/**
 * The share of the all-reduce that backward hides, from one interleaved run at 2 ranks:
 * 1 − (DDP step − DDP step that communicates nothing) / all-reduce alone, in [0, 1].
 */
export const hiddenFraction = (t: StepTimes) => Math.min(1, Math.max(0, 1 - (t.ddp - t.local) / t.comm));
/** What communicating adds to a step's CPU time (rank 0), and what the all-reduce alone costs. */
const cpuOf = (t: StepTimes) => ({ ddpOverLocal: t['cpu:ddp'] - t['cpu:local'], comm: t['cpu:comm'] });
/** The median; of an even count the mean of the middle two (the upper one, used before, was 2 rounds' best). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
export const pct = (x: number) => `${(x * 100).toFixed(0)} %`;

/** Where a step's CPU goes on rank 0, by process and by thread (/proc schedstat), for the report. */
export const cpuNote = (runs: StepTimes[] = []) => {
  if (runs.length === 0) return '';
  const cpu = runs.map(cpuOf);
  const ms = (xs: number[]) => `${median(xs).toFixed(0)} ms`;
  const thread = (mode: string, which: string) => ms(runs.map((t) => t[`thread:${mode}:${which}`]));
  const more = (which: string) => ms(runs.map((t) => t[`thread:ddp:${which}`] - t[`thread:local:${which}`]));
  return (
    `Where it goes: the all-reduce alone costs ${ms(cpu.map((c) => c.comm))} of CPU per step on rank 0 ` +
    `(process.cpuUsage), and a DDP step ${ms(cpu.map((c) => c.ddpOverLocal))} more CPU than a local one; per ` +
    `thread (/proc schedstat), a DDP step over a local one: main thread +${more('main')}, comm thread ` +
    `${thread('ddp', 'comm')} (the all-reduce alone: ${thread('comm', 'comm')}), other threads +${more('rest')}. ` +
    `With both cores running the two ranks' backward, that CPU work lengthens the step whatever the overlap.`
  );
};

/** A fraction per round, as the median and every round. */
export const byRound = (xs: number[]) =>
  xs.length === 0 ? 'not run' : `median ${pct(median(xs))} (rounds: ${xs.map(pct).join(', ')})`;
