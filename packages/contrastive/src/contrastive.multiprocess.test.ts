import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { arrayOf, casesFor, golden, runCase } from './test/cases.js';
import { expectClose, maxAbsDiff } from './test/expect.js';

type RankResult = {
  rank: number;
  results: Record<string, { loss: number; grads: Record<string, number[]> }>;
  misfit: string;
};

/** contrastive.child.ts on `world` real rank processes; one RESULT per rank, by rank. */
async function runRanks(world: number): Promise<RankResult[]> {
  const run = await runWorld<RankResult>({
    script: new URL('./test/contrastive.child.ts', import.meta.url),
    nprocs: world,
    timeoutMs: 100_000,
  });
  return run.results;
}

/** What each leaf's gradient must be: PyTorch's for the golden cases, a single process's for SigLIP. */
async function expectedGrads(name: string, world: number): Promise<{ loss: number; grads: Record<string, number[]> }> {
  const c = casesFor(world).find((x) => x.name === name)!;
  if (c.kind === 'siglip') {
    const { loss, grads, leaves } = await runCase(c);
    for (const t of Object.values(leaves)) t.dispose();
    return { loss, grads };
  }
  const g = golden(c.fixture!);
  const grads: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(g.outputs)) if (k.startsWith('grad_')) grads[k.slice(5)] = arrayOf(v).data;
  return { loss: arrayOf(g.outputs.loss).data[0], grads };
}

describe.each([2, 3, 4])('%i real ranks', (world) => {
  it('reproduce the single-process losses and, after DDP averaging, gradients; the naive gather does not; rows of another width are refused', async () => {
    const ranks = await runRanks(world);
    for (const c of casesFor(world)) {
      const want = await expectedGrads(c.name, world);
      const losses = ranks.map((r) => r.results[c.name].loss);
      // averaging the ranks' losses is what DDP's averaged gradients differentiate
      expectClose([losses.reduce((a, b) => a + b, 0) / world], [want.loss], `${c.name}: mean of local losses`);
      const perRank = c.fixture
        ? (golden(c.fixture).outputs.local_loss_per_rank as Record<string, number[]> | undefined)?.[String(world)]
        : undefined;
      if (perRank && c.kind === 'clip' && c.split.every((n) => n === c.split[0]))
        expectClose(losses, perRank, `${c.name}: local_loss_per_rank`);
      for (const r of ranks) {
        for (const [leaf, g] of Object.entries(want.grads)) {
          const got = r.results[c.name].grads[leaf];
          if (c.naive) {
            if (leaf !== 'logit_scale_log')
              expect(maxAbsDiff(got, g), `${c.name}: ${leaf} must be wrong`).toBeGreaterThan(1e-3);
          } else {
            expectClose(got, g, `${c.name}: rank ${r.rank} grad ${leaf}`);
          }
        }
      }
    }
    // rows of [4] beside rows of [2] (as many floats): each rank read the others at its own width and
    // trained on a different batch, silently; now every rank refuses
    for (const r of ranks)
      expect(r.misfit).toMatch(/^ContrastiveError: .*rows of different shapes: rank 0's are \[4\], rank 1's \[2\]/);
  }, 120_000);
});
