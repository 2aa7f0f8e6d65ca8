import { findFreePort } from '@ddp/launch';
import { loadSharedMemory } from '@ddp/shm';
import { beforeAll, describe, expect, it } from 'vitest';
import { IN_PLACE_MIN_ELEMENTS } from './bucket.js';
import { okResultsOf } from './test/expect.js';
import { runWorld, type WorldResult } from './test/run-ranks.js';

type Step = {
  local: number[][];
  averaged: number[][];
  sizes: number[];
  sameTensors: boolean[];
  kept: number[][];
} & Record<'copiedOut' | 'writtenInPlace' | 'uploaded' | 'newTensors' | 'large', number>;

/** Elements of the gradients too small to be reduced in place (copied into the bucket and back). */
const smallOf = (r: Step) => r.sizes.reduce((n, s) => n + (s < IN_PLACE_MIN_ELEMENTS ? s : 0), 0);

/** Every rank's gradients equal the mean of the ranks' local gradients. */
function expectAveraged(ranks: Step[]): void {
  for (const r of ranks) {
    for (const [i, grad] of r.averaged.entries()) {
      for (const [j, v] of grad.entries())
        expect(v).toBeCloseTo(ranks.reduce((s, q) => s + q.local[i][j], 0) / ranks.length, 6);
    }
  }
}

describe.skipIf(!loadSharedMemory())('gradients reduced where they live (2 real processes)', () => {
  let results: WorldResult;
  beforeAll(async () => {
    results = await runWorld(await findFreePort(), 2, ['inPlace', 'inPlaceSharedStorage', 'rewrap'], 60_000);
  }, 70_000);

  it('default hook: no copy of a large gradient in a step, the averages in the tensors backward made', () => {
    const ranks = okResultsOf(results, 'inPlace') as Step[];
    expectAveraged(ranks);
    for (const r of ranks) {
      expect(r.sizes[r.large]).toBeGreaterThanOrEqual(IN_PLACE_MIN_ELEMENTS);
      expect([r.copiedOut, r.writtenInPlace, r.uploaded]).toEqual([smallOf(r), smallOf(r), 0]); // small ones: 1 + 1
      expect(r.sameTensors.every(Boolean)).toBe(true);
      expect(r.newTensors).toBe(r.sizes.length); // the gradients, and nothing else
    }
  });

  it('a gradient whose storage a kept reshape shares is copied and gets a new tensor; the reshape keeps its values', () => {
    const ranks = okResultsOf(results, 'inPlaceSharedStorage') as Step[];
    expectAveraged(ranks);
    for (const r of ranks) {
      const shared = r.sizes[r.large];
      expect([r.copiedOut, r.writtenInPlace, r.uploaded]).toEqual([smallOf(r) + shared, smallOf(r), shared]);
      expect(r.sameTensors).toEqual(r.sizes.map((_, i) => i !== r.large));
      expect(r.kept[0]).toEqual(r.local[r.large]);
    }
  });

  // the second wrapper's hooks reduced the same storage in place while the first's did: 3e-3 off, on both ranks
  it('a module already wrapped is refused a second wrapper until dispose(); wrapped again, it trains as one process', () => {
    for (const r of okResultsOf(results, 'rewrap') as { refused: string; maxDiff: number }[]) {
      expect(r.refused).toMatch(
        /^DDPUsageError: DistributedDataParallel.create \(rank \d\): 0.weight, .* already belong/,
      );
      expect(r.refused).toMatch(/call dispose\(\) on it first/);
      expect(r.maxDiff).toBeLessThan(1e-5);
    }
  });
});
