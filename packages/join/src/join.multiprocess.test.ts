import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface CounterResult {
  rank: number;
  seen: number;
  count: number;
  maxCount: number;
  active: number[];
  threw: string;
}

describe('join across real processes (the Counter of the Join tutorial)', () => {
  it('2 ranks with 5 and 6 inputs count 10 and 11, and 11 across all ranks', async () => {
    const ranks = (
      await runWorld<CounterResult>({
        script: new URL('./test/counter.child.ts', import.meta.url),
        nprocs: 2,
        args: ['count'],
        timeoutMs: 60_000,
      })
    ).results;
    expect(ranks.map((r) => [r.seen, r.count, r.maxCount, r.threw])).toEqual([
      [5, 10, 11, ''],
      [6, 11, 11, ''],
    ]);
  }, 70_000);

  it('3 ranks with 5, 6 and 7 inputs count 15, 17, 18, and 18 across all ranks', async () => {
    const ranks = (
      await runWorld<CounterResult>({
        script: new URL('./test/counter.child.ts', import.meta.url),
        nprocs: 3,
        args: ['count'],
        timeoutMs: 60_000,
      })
    ).results;
    expect(ranks.map((r) => [r.seen, r.count, r.maxCount])).toEqual([
      [5, 15, 18],
      [6, 17, 18],
      [7, 18, 18],
    ]);
    expect(ranks[2].active).toEqual([3, 3, 3, 3, 3, 2, 1]);
  }, 70_000);

  it('throwOnEarlyTermination raises EarlyTerminationError on every rank, no hang', async () => {
    const ranks = (
      await runWorld<CounterResult>({
        script: new URL('./test/counter.child.ts', import.meta.url),
        nprocs: 3,
        args: ['throw'],
        timeoutMs: 60_000,
      })
    ).results;
    expect(ranks.map((r) => r.threw)).toEqual([
      'EarlyTerminationError',
      'EarlyTerminationError',
      'EarlyTerminationError',
    ]);
    // rank 0 ran out after its 5 inputs; the others stop at their 6th, before its all-reduce
    expect(ranks.map((r) => [r.seen, r.count])).toEqual([
      [5, 15],
      [6, 15],
      [6, 15],
    ]);
  }, 70_000);
});
