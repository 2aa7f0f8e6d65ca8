import type { ProcessGroup } from '@ddp/comm';
import { describe, expect, it } from 'vitest';
import { BucketCapTuner, DEFAULT_CAP_CANDIDATES_MB, firstCapUnder } from './autotune.js';
import { assignBuckets } from './bucket-layout.js';

const MB = 2 ** 20;
/** The bench's MLP 1024→2048→2048→2048→1024 in bucket order (last layer first): 48 MiB of gradients. */
const SIZES = [1024, 2048 * 1024, 2048, 2048 * 2048, 2048, 2048 * 2048, 2048, 1024 * 2048];
const TOTAL = SIZES.reduce((n, s) => n + 4 * s, 0);
/** A group of one: the agreement all-reduce leaves the times as they are. */
const alone = { allReduce: () => ({ wait: async () => {} }) } as unknown as ProcessGroup;

/** Runs the tuner's trials, each candidate timed at `msOf(cap)`; returns what it kept. */
async function tune(tuner: BucketCapTuner, msOf: (capMB: number) => number) {
  let cap = tuner.plan(SIZES, MB);
  while (tuner.tuning) cap = await tuner.record(msOf(cap), alone);
  return tuner.result!;
}

describe('BucketCapTuner', () => {
  it('tries one bucket for all gradients, the first included, and keeps it when it is fastest', async () => {
    const result = await tune(new BucketCapTuner([2, 25], true), (mb) => (mb > 48 ? 100 : 120));
    expect(result.candidatesMB).toEqual([2, 25, 49]); // 48.03 MiB of gradients
    expect(result.chosenMB).toBe(49);
    expect(assignBuckets(SIZES, firstCapUnder(49, MB, TOTAL), 49 * MB)).toEqual([SIZES.map((_, i) => i)]);
    // a cap that does not hold every gradient leaves the first bucket its own limit
    expect(firstCapUnder(25, MB, TOTAL)).toBe(MB);
  });

  it('by default: 2, 8, 25 and 64 MiB, where 64 holds all 48 MiB and is the one bucket (layouts tried once each)', async () => {
    const result = await tune(new BucketCapTuner(DEFAULT_CAP_CANDIDATES_MB, true), (mb) => mb);
    expect(result.candidatesMB).toEqual([2, 25, 64]); // 8 MiB makes 2's buckets: each layer fills one
    expect(assignBuckets(SIZES, firstCapUnder(64, MB, TOTAL), 64 * MB)).toHaveLength(1);
    const given = await tune(new BucketCapTuner([2, 25], false), (mb) => mb);
    expect(given.candidatesMB).toEqual([2, 25]); // a list the user gave is tried as given
  });
});
