import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

type Result = { rank: number; a?: number; b?: number; error?: { name: string; message: string } };
const run = (scenario: string) =>
  spawnRanks({ nprocs: 3, script: new URL('./test/subgroup-ids.child.ts', import.meta.url), args: [scenario] });

describe('newGroup: the members agree on the group through the store', () => {
  it('a rank that skips a group it is not in makes the next group with its members, not with the skipped one', async () => {
    // before: ids counted per rank, so rank 2's [0, 2] took the id ranks 0 and 1 gave [0, 1]: its 1000 went into
    // their sum (1001), or theirs into its, or a timeout
    const out = await run('skip');
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    const results = out.map((o) => o.results[0] as Result);
    expect(results).toEqual([
      { rank: 0, a: 3, b: 1010 },
      { rank: 1, a: 3 },
      { rank: 2, b: 1010 },
    ]);
  }, 60_000);

  it('a member that never makes the group: the others get CommTimeoutError naming the group', async () => {
    const out = await run('missing');
    const [, one] = out.map((o) => o.results[0] as Result);
    expect(one.error?.name).toBe('CommTimeoutError');
    expect(one.error?.message).toMatch(/^rank 1: newGroup\(\[0,1\]\): rank 0 did not make this group/);
  }, 60_000);
});
