import { explain, spawnRanks } from '@ddp/launch/testing';
import { expect, it } from 'vitest';

// issue-order.child.ts: what each case gives when every op is awaited before the next (2 ranks)
const total = 1 + 2;
const expected = (n: number) => ({
  [`allReduce twice plain×${n}`]: 2 * total,
  [`allReduce twice shared×${n}`]: 2 * total,
  [`broadcast then allReduce plain×${n}`]: 2 * 5,
  [`broadcast then allReduce shared×${n}`]: 2 * 5,
  [`reduceScatter then allGatherInto ×${n}`]: total,
});

it("an op issued on an earlier in-flight op's output reads that result, as if awaited (2 ranks)", async () => {
  const out = await spawnRanks({
    nprocs: 2,
    script: new URL('./test/issue-order.child.ts', import.meta.url),
    timeoutMs: 60_000,
  });
  expect(
    out.every((o) => o.code === 0),
    explain(out),
  ).toBe(true);
  const wrong: string[] = [];
  for (const o of out) {
    const got = o.results[0] as Record<string, unknown>;
    for (const [what, v] of Object.entries({ ...expected(4), ...expected(100_000) }))
      if (JSON.stringify(got[what]) !== JSON.stringify({ first: v, last: v, uniform: true }))
        wrong.push(`rank ${o.rank} ${what}: ${JSON.stringify(got[what])}, expected ${v}`);
  }
  expect(wrong).toEqual([]);
  // the op settles: it completes, or fails typed because this rank's group (NotInitializedError) or the
  // peer's (PeerLostError: its sockets closed first) was destroyed under it; 'never settled' is the hang
  for (const o of out)
    expect(['completed', 'NotInitializedError', 'PeerLostError']).toContain(
      (o.results[1] as { destroyed: string }).destroyed,
    );
}, 90_000);
