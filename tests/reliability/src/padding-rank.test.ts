import { runWorld } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { childScript } from './child-script.js';

/**
 * @ddp/autograd's crossEntropy with every label ignored returned 0 where torch's mean returns
 * NaN; it now returns NaN. A DDP rank whose batch is padding only still trains as under torch:
 * its loss is NaN but its gradient 0, finite, so DDP's checkFinite passes and the average is
 * the other rank's gradient halved (torch's DDP alike).
 */
describe('a DDP rank whose batch is padding only', () => {
  it('has a NaN loss and steps every rank as torch: rank 0 gradient averaged with zeros', async () => {
    type Result = { rank: number; loss: string; error: string | null; hash: string; want: string };
    const run = await runWorld<Result>({ script: childScript('padding-rank.child.ts'), nprocs: 2 });
    const [a, b] = run.results;
    expect([a.error, b.error]).toEqual([null, null]);
    expect(Number(a.loss)).toBeGreaterThan(0);
    expect(b.loss).toBe('NaN');
    for (const r of [a, b]) expect(r.hash, `rank ${r.rank}`).toBe(r.want);
  }, 90_000);
});
