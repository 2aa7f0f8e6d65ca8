import { explain, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { phase, wrongAgreement, wrongAverages } from './test/agreement-expect.js';
import { BAD_CALLS, MISMATCHES } from './test/mismatches.js';

/**
 * Calls that differ across ranks, a call that fails on one rank only, and use after destroy:
 * a typed error on every rank (roots and senders included), and every later call on the
 * group raises naming the first failure. On shared memory (when built) and on Unix sockets.
 */
describe.each(['default', 'uds'])('every rank raises (%s transport)', (transport) => {
  const env: Record<string, string> = transport === 'uds' ? { DDP_TRANSPORT: 'uds' } : {};

  const differ = 'collectives that differ in root, count, dtype, per-rank sizes or op, or are invalid on one rank';
  it(`${differ}: a typed error on every rank, then on every later call`, async () => {
    const args = [...Object.keys(MISMATCHES), ...Object.keys(BAD_CALLS)];
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/agreement.child.ts', import.meta.url),
      args,
      env,
      timeoutMs: 100_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    expect(wrongAgreement(out)).toEqual([]);
  }, 120_000);

  it('a group used after destroyProcessGroup: NotInitializedError at once; its live peers: PeerLostError', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/agreement.child.ts', import.meta.url),
      args: ['destroyed'],
      env,
      timeoutMs: 40_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    const [r0, r1, r2] = out.map((o) => phase(o, 'destroyed'));
    expect(r0?.name, r0?.message).toBe('NotInitializedError');
    expect(r0?.message).toMatch(/rank 0: allReduce .*destroyProcessGroup/);
    for (const r of [r1, r2]) {
      expect(r?.name, r?.message).toBe('PeerLostError');
      expect(r?.ranks).toEqual([0]);
    }
  }, 60_000);

  it('an op in flight when its rank destroys the world: NotInitializedError saying so; its peers: PeerLostError', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/agreement.child.ts', import.meta.url),
      args: ['inflight'],
      env,
      timeoutMs: 40_000,
    });
    const [r0, r1, r2] = out.map((o) => phase(o, 'inflight'));
    // before: CommError 'comm worker exited' or whatever the closed sockets raised, untyped
    expect(r0?.name, r0?.message).toBe('NotInitializedError');
    expect(r0?.message).toMatch(/^rank 0: allReduce was still in flight when destroyProcessGroup closed its group/);
    for (const r of [r1, r2]) expect(r?.name, r?.message).toBe('PeerLostError');
  }, 60_000);
});

describe.each([
  ['default', 3],
  ['uds', 3],
  ['default', 2],
])('AVG near the dtype limit (%s transport, %i ranks)', (transport, nprocs) => {
  it('overflowing sums (int32 too) average to finite values, ordinary ones bit-exact, identical on every rank', async () => {
    const env: Record<string, string> = transport === 'uds' ? { DDP_TRANSPORT: 'uds' } : {};
    const out = await spawnRanks({
      nprocs,
      script: new URL('./test/average.child.ts', import.meta.url),
      env,
      timeoutMs: 100_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    expect(wrongAverages(out)).toEqual([]);
  }, 120_000);
});
