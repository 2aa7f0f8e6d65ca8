import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface RankResult {
  logits: number;
  weights: number;
  worst: string[];
  leaked: number;
  evalLeaked: number;
  layers: Record<string, number>;
  dpRank: number;
  tpRank: number;
  norms: number[];
  refused: string | null;
}

function check(results: RankResult[]): void {
  for (const [rank, r] of results.entries()) {
    expect(r.logits, `rank ${rank}: logits vs the unsharded model`).toBeLessThan(1e-5);
    expect(r.weights, `rank ${rank}: weights after one step (${r.worst.join(', ')})`).toBeLessThan(1e-5);
    expect(r.leaked, `rank ${rank}: tensors leaked per training step`).toBe(0);
    expect(r.evalLeaked, `rank ${rank}: tensors leaked by evaluation forwards`).toBe(0);
    for (const [what, d] of Object.entries(r.layers))
      expect(d, `rank ${rank}: ${what} vs nn.Linear`).toBeLessThan(1e-5);
  }
}

describe('tensor parallelism across real processes', () => {
  it('tp = 2: a 2-block transformer gives the unsharded logits, and weights after an AdamW step', async () => {
    const { results } = await runWorld<RankResult>({
      script: new URL('./test/tp.child.ts', import.meta.url),
      nprocs: 2,
      args: ['2'],
    });
    expect(results.map((r) => r.tpRank)).toEqual([0, 1]);
    check(results);
  }, 90_000);

  it('tp = 2, gradients clipped: the norm of the whole model on every rank, weights as the unsharded one', async () => {
    const { results } = await runWorld<RankResult>({
      script: new URL('./test/tp.child.ts', import.meta.url),
      nprocs: 2,
      args: ['2', 'clip'],
    });
    check(results);
    for (const r of results) {
      const [reference, sharded] = r.norms;
      expect(reference, 'clipping scales the first step').toBeGreaterThan(0.05);
      expect(sharded).toBeCloseTo(reference ?? 0, 5);
      expect(r.refused).toMatch(/OptimizerError: clipGradNorm: gradient \d+ is split over the ranks \[0,1\]/);
    }
  }, 90_000);

  it('dp 2 × tp 2 on 4 ranks: each tp group of the grid does the same', async () => {
    const { results } = await runWorld<RankResult>({
      script: new URL('./test/tp.child.ts', import.meta.url),
      nprocs: 4,
      args: ['2'],
    });
    expect(results.map((r) => [r.dpRank, r.tpRank])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    check(results);
  }, 90_000);
});
