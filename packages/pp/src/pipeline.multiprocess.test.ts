import { runWorld } from '@ddp/launch/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeSchedule, peakInFlight, type ScheduleName } from './index.js';
import { CFG, type NamedValues, referenceRun } from './test/model.js';

interface Run {
  params: NamedValues;
  losses: (number | null)[];
  numTensors: number[];
  peakLive: number;
  peakBytes: number;
}
interface RankResult {
  rank: number;
  ppRank: number;
  dpRank: number;
  runs: Record<ScheduleName, Run>;
}

async function runPipelineWorld(pp: number, dp: number, steps: number): Promise<RankResult[]> {
  const { results } = await runWorld<RankResult>({
    script: new URL('./test/train.child.ts', import.meta.url),
    nprocs: pp * dp,
    args: [String(pp), String(dp), String(steps)],
    env: { DDP_HEARTBEAT_MS: '0' },
    timeoutMs: 140_000,
  });
  return results;
}

const maxAbsDiff = (a: number[], b: number[]) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

/**
 * [pp, dp, steps]: the two worlds of the acceptance criteria, and a shorter run of a 4-stage
 * pipeline whose middle stages both receive and send.
 */
const WORLDS = [
  [2, 1, CFG.steps],
  [2, 2, CFG.steps],
  [4, 1, 4],
] as const;
const worlds = new Map<string, RankResult[]>();
const references = new Map<string, Awaited<ReturnType<typeof referenceRun>>>();

// The worlds run at once: their ranks spend most of their time waiting on each other.
beforeAll(async () => {
  const running = Promise.all(
    WORLDS.map(async ([pp, dp, steps]) => worlds.set(`${pp}x${dp}`, await runPipelineWorld(pp, dp, steps))),
  );
  for (const [, dp, steps] of WORLDS)
    if (!references.has(`${dp}/${steps}`)) references.set(`${dp}/${steps}`, await referenceRun(dp, steps));
  await running;
}, 150_000);

for (const [pp, dp, steps] of WORLDS) {
  describe(`pipeline parallel, pp = ${pp} × dp = ${dp} on ${pp * dp} processes`, () => {
    let ranks: RankResult[];
    let reference: Awaited<ReturnType<typeof referenceRun>>;
    beforeAll(() => {
      ranks = worlds.get(`${pp}x${dp}`)!;
      reference = references.get(`${dp}/${steps}`)!;
    });

    for (const schedule of ['afab', '1f1b'] as const) {
      it(`${schedule}: every stage's weights after ${steps} steps match the single-process run within 1e-5`, () => {
        const seen = new Set<string>();
        for (const r of ranks) {
          for (const [name, values] of Object.entries(r.runs[schedule].params)) {
            const want = reference.params[name];
            expect(want, `${name} of rank ${r.rank} is not a parameter of the whole model`).toBeDefined();
            expect(maxAbsDiff(values, want), `${name} on rank ${r.rank}`).toBeLessThan(1e-5);
            seen.add(name);
          }
        }
        expect([...seen].sort()).toEqual(Object.keys(reference.params).sort());
        // Every weight moved well beyond the tolerance, so matching it says something.
        for (const [name, values] of Object.entries(reference.params))
          expect(maxAbsDiff(values, reference.initial[name]), name).toBeGreaterThan(1e-3);
      });

      it(`${schedule}: the last stages' losses average to the single-process loss at every step`, () => {
        const last = ranks.filter((r) => r.ppRank === pp - 1);
        for (let step = 0; step < steps; step++) {
          const mean = last.reduce((s, r) => s + r.runs[schedule].losses[step]!, 0) / last.length;
          expect(Math.abs(mean - reference.losses[step])).toBeLessThan(1e-5);
        }
        expect(reference.losses.at(-1)!).toBeLessThan(reference.losses[0]);
        for (const r of ranks.filter((x) => x.ppRank !== pp - 1))
          expect(r.runs[schedule].losses.every((l) => l === null)).toBe(true);
      });

      it(`${schedule}: tf.memory().numTensors stays flat across steps on every rank`, () => {
        for (const r of ranks) {
          const counts = r.runs[schedule].numTensors;
          expect(new Set(counts.slice(1)).size, `rank ${r.rank}: ${counts.join(' ')}`).toBe(1);
        }
      });
    }

    it('1F1B holds p − stage micro-batches of activations, AFAB all of them (counted while running)', () => {
      for (const r of ranks) {
        const { afab, '1f1b': ofob } = r.runs;
        expect(afab.peakLive).toBe(CFG.numMicroBatches);
        expect(ofob.peakLive).toBe(Math.min(pp - r.ppRank, CFG.numMicroBatches));
        expect(ofob.peakLive).toBe(peakInFlight(makeSchedule('1f1b', r.ppRank, pp, CFG.numMicroBatches)));
        // below AFAB wherever p − stage < m: every stage of the 2-stage worlds
        if (pp - r.ppRank < CFG.numMicroBatches) expect(ofob.peakLive).toBeLessThan(afab.peakLive);
        console.log(
          `pp ${pp} × dp ${dp}, rank ${r.rank} (stage ${r.ppRank}): peak live activations AFAB ` +
            `${afab.peakLive}, 1F1B ${ofob.peakLive}; peak tf bytes AFAB ${afab.peakBytes}, 1F1B ${ofob.peakBytes}`,
        );
      }
    });
  });
}
