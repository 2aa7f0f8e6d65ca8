import { describe, expect, it } from 'vitest';
import { BAD_CALLS, MISMATCHES } from './test/mismatches.js';
import { explain, type RankOutcome, runWorld } from './test/spawn-world.js';

interface Outcome {
  phase: string;
  name: string;
  message?: string;
  ranks?: number[];
  cause?: { name: string; message: string };
}
const phase = (o: RankOutcome, p: string) => (o.results as Outcome[]).find((r) => r.phase === p);

/**
 * Calls that differ across ranks, a call that fails on one rank only, and use after destroy:
 * a typed error on every rank (roots and senders included), and every later call on the
 * group raises naming the first failure. On shared memory (when built) and on Unix sockets.
 */
describe.each(['default', 'uds'])('every rank raises (%s transport)', (transport) => {
  const env: Record<string, string> = transport === 'uds' ? { DDP_TRANSPORT: 'uds' } : {};

  const differ = 'collectives that differ in root, count, dtype, per-rank sizes or op, or are invalid on one rank';
  it(`${differ}: a typed error on every rank, then on every later call`, async () => {
    const names = Object.keys(MISMATCHES);
    const bad = Object.keys(BAD_CALLS);
    const args = [...names, ...bad];
    const out = await runWorld({ worldSize: 3, script: 'agreement.child.ts', args, env, timeoutMs: 100_000 });
    expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
    const wrong: string[] = [];
    const want = (o: RankOutcome, p: string, name: string, ok: (r: Outcome) => boolean = () => true) => {
      const r = phase(o, p);
      if (r?.name !== name || !ok(r)) wrong.push(`rank ${o.rank}, ${p}: ${r?.name}: ${r?.message ?? ''}`.slice(0, 300));
    };
    for (const o of out) {
      for (const name of names) {
        want(o, name, 'CollectiveMismatchError');
        const namesFirst = (r: Outcome) => r.message?.includes('refused') === true && r.cause?.name === 'CollectiveMismatchError';
        want(o, `${name}/after`, 'CollectiveMismatchError', namesFirst);
      }
      // rank 1's bad call aborted the group: its peers do not run their collective without it
      for (const name of bad) {
        if (o.rank === 1) want(o, name, 'InvalidArgumentError');
        // (refused at once when rank 1's abort arrived before this rank made the call)
        else want(o, name, 'GroupAbortedError', (r) => r.ranks?.join() === '1' && /InvalidArgumentError/.test(r.message ?? ''));
        want(o, `${name}/after`, 'GroupAbortedError', (r) => /refused.*InvalidArgumentError/.test(r.message ?? ''));
      }
      // the world group was never involved
      want(o, 'world', 'ok');
    }
    expect(wrong).toEqual([]);
  }, 120_000);

  it('a group used after destroyProcessGroup: NotInitializedError at once; its live peers: PeerLostError', async () => {
    const out = await runWorld({ worldSize: 3, script: 'agreement.child.ts', args: ['destroyed'], env, timeoutMs: 40_000 });
    expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
    const [r0, r1, r2] = out.map((o) => phase(o, 'destroyed'));
    expect(r0?.name, r0?.message).toBe('NotInitializedError');
    expect(r0?.message).toMatch(/rank 0: allReduce .*destroyProcessGroup/);
    for (const r of [r1, r2]) {
      expect(r?.name, r?.message).toBe('PeerLostError');
      expect(r?.ranks).toEqual([0]);
    }
  }, 60_000);
});

interface Average {
  phase: string;
  finite: boolean;
  maxRel: number;
  ordinaryExact: boolean;
  hash: string;
}

describe.each(['default', 'uds'])('AVG near the dtype limit (%s transport)', (transport) => {
  it('overflowing sums average to finite values, ordinary ones bit-exact, identical on every rank', async () => {
    const env: Record<string, string> = transport === 'uds' ? { DDP_TRANSPORT: 'uds' } : {};
    const out = await runWorld({ worldSize: 3, script: 'average.child.ts', env, timeoutMs: 100_000 });
    expect(out.every((o) => o.code === 0), explain(out)).toBe(true);
    const tolerance = (phase: string) => (phase.includes('float16') ? 2e-3 : phase.includes('bfloat16') ? 1e-2 : 1e-6);
    const wrong: string[] = [];
    const first = (out[0]?.results ?? []) as Average[];
    for (const o of out) {
      for (const r of o.results as Average[]) {
        const ok = r.finite && r.maxRel <= tolerance(r.phase) && r.ordinaryExact;
        if (!ok) wrong.push(`rank ${o.rank} ${r.phase}: ${JSON.stringify(r)}`);
        const peer = first.find((p) => p.phase === r.phase);
        // reduceScatter leaves each rank its own chunk: nothing to compare
        const differs = peer && !r.phase.startsWith('reduceScatter') && peer.hash !== r.hash;
        if (differs) wrong.push(`rank ${o.rank} ${r.phase}: differs from rank 0`);
      }
    }
    expect(first.length).toBeGreaterThanOrEqual(10);
    expect(wrong).toEqual([]);
  }, 120_000);
});
