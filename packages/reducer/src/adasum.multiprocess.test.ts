import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface RankResult {
  rank: number;
  local: number[];
  adasum: number[];
  localGrads: number[][];
  ddpGrads: number[][];
  adasumOptimizer: { start: number[][]; localDeltas: number[][]; stepped: number[][][]; numTensors: number[] };
}

/** Horovod's pairwise Adasum in float64, the formula written out again (not the code under test). */
function pair(a: number[], b: number[]): number[] {
  const dot = a.reduce((s, x, i) => s + x * b[i], 0);
  const na = a.reduce((s, x) => s + x * x, 0);
  const nb = b.reduce((s, x) => s + x * x, 0);
  const [ca, cb] = [na, nb].map((n) => (n >= 1e-8 ? 1 - dot / (2 * n) : 1)); // Horovod's adasum.h
  return a.map((x, i) => ca * x + cb * b[i]);
}
/** The binary tree over ranks 0..n−1: Adasum(Adasum(g0, g1), Adasum(g2, g3)). */
const tree = (vs: number[][]): number[] =>
  vs.length === 1 ? vs[0] : pair(tree(vs.slice(0, vs.length / 2)), tree(vs.slice(vs.length / 2)));
/** Per segment: Adasum works per layer. */
const bySegments = (vs: number[][], cuts: number[]) =>
  cuts.slice(1).flatMap((end, i) => tree(vs.map((v) => v.slice(cuts[i], end))));

const expectClose = (ours: number[], want: number[]) => {
  expect(ours.length).toBe(want.length);
  ours.forEach((v, i) => {
    expect(v).toBeCloseTo(want[i], 5);
  });
};

const script = new URL('./test/adasum.child.ts', import.meta.url);
const worlds = new Map<number, Promise<RankResult[]>>();
/** One world per size, shared by the tests that read it. */
const resultsOf = (nprocs: number): Promise<RankResult[]> => {
  if (!worlds.has(nprocs))
    worlds.set(
      nprocs,
      runWorld<RankResult>({ script, nprocs, timeoutMs: 60_000 }).then((w) => w.results),
    );
  return worlds.get(nprocs)!;
};

describe('Adasum across real processes', () => {
  for (const nprocs of [2, 4]) {
    it(`${nprocs} ranks: every rank holds the tree's Adasum of all ranks' vectors, per segment; as a DDP comm hook too`, async () => {
      const ranks = await resultsOf(nprocs);
      const want = bySegments(
        ranks.map((r) => r.local),
        [0, 6, 10],
      );
      // and not merely the average or the sum: the test could not pass on either
      const sum = ranks[0].local.map((_, i) => ranks.reduce((s, r) => s + r.local[i], 0));
      expect(Math.max(...want.map((v, i) => Math.abs(v - sum[i])))).toBeGreaterThan(0.1);
      for (const r of ranks) {
        expectClose(r.adasum, want);
        expect(r.adasum).toEqual(ranks[0].adasum); // bit for bit on every rank
        r.ddpGrads.forEach((g, p) => {
          expectClose(g, tree(ranks.map((q) => q.localGrads[p])));
        });
      }
    }, 70_000);

    it(`${nprocs} ranks: AdasumOptimizer lands every rank on start + the Adasum of each rank's own Adam step`, async () => {
      const ranks = await resultsOf(nprocs);
      const { start } = ranks[0].adasumOptimizer;
      start.forEach((values, p) => {
        const deltas = ranks.map((r) => r.adasumOptimizer.localDeltas[p]);
        const want = tree(deltas).map((d, i) => values[i] + d);
        // Adam's first step is about ±lr per element: where ranks' signs differ the mean of the
        // steps is another point, so the test could not pass on averaging
        const mean = values.map((v, i) => v + deltas.reduce((s, d) => s + d[i], 0) / nprocs);
        expect(Math.max(...want.map((v, i) => Math.abs(v - mean[i])))).toBeGreaterThan(1e-3);
        for (const r of ranks) {
          expectClose(r.adasumOptimizer.stepped[0][p], want);
          expect(r.adasumOptimizer.stepped).toEqual(ranks[0].adasumOptimizer.stepped); // bit for bit
        }
      });
      for (const r of ranks) expect(new Set(r.adasumOptimizer.numTensors).size).toBe(1);
    }, 70_000);
  }

  it('3 ranks: AdasumError naming the rank and the group size on every rank (AdasumOptimizer when built), no hang', async () => {
    const ranks = (
      await runWorld<{ error: string; optimizerError: string }>({ script, nprocs: 3, args: ['odd'], timeoutMs: 60_000 })
    ).results;
    ranks.forEach((r, rank) => {
      expect(r.error).toMatch(new RegExp(`^AdasumError: Adasum \\(rank ${rank} of 3\\): needs a power-of-two`));
      expect(r.optimizerError).toMatch(
        new RegExp(`^AdasumError: Adasum \\(rank ${rank} of 3\\): needs a power-of-two`),
      );
    });
  }, 70_000);

  it('2 ranks, a tensor-parallel shard with both parts in the group: AdasumError at the first step on every rank', async () => {
    // before: the deltas of different parts of the shard were combined, silently
    const ranks = (
      await runWorld<{ error: string; unchanged: boolean }>({
        script,
        nprocs: 2,
        args: ['spanning'],
        timeoutMs: 60_000,
      })
    ).results;
    ranks.forEach((r, rank) => {
      expect(r.error).toMatch(
        new RegExp(`^AdasumError: rank ${rank}: AdasumOptimizer: parameter 0 is a tensor-parallel shard`),
      );
      expect(r.unchanged).toBe(true);
    });
  }, 70_000);

  it("DDP's adasumHook over a bucket that packs biases before 65 536-weight matrices: as adasumAllReduce", async () => {
    const { results } = await runWorld<{ error: string; maxDiff: number }>({
      script,
      nprocs: 2,
      args: ['big'],
      timeoutMs: 60_000,
    });
    for (const r of results) {
      expect(r.error).toBe('');
      expect(r.maxDiff).toBeLessThan(1e-7);
    }
  }, 70_000);
});
