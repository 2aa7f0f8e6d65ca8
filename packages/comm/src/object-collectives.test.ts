import { explain, mpirunMissing, type RankOutcome, runMpirun, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { mpiAddonMissing } from './test/mpi-addon.js';

type Result = { rank: number; checks: number; failures: string[]; errors: Record<string, string> };

const script = new URL('./test/object-collectives.child.ts', import.meta.url);
const noMpi = mpirunMissing() ?? (await mpiAddonMissing());

describe('object collectives (torch all_gather_object, broadcast_object_list, gather_object, scatter_object_list)', () => {
  it('3 ranks: cloned values in rank order; a value one rank cannot send raises on every rank, naming it', async () => {
    expectObjectCollectives(await spawnRanks({ nprocs: 3, script }));
  }, 60_000);

  it.skipIf(noMpi !== null)(
    'the same under mpirun -np 3 on the mpi backend',
    async () => {
      expectObjectCollectives(await runMpirun({ np: 3, script, env: { DDP_COMM_BACKEND: 'mpi' }, timeoutMs: 60_000 }));
    },
    90_000,
  );
});

function expectObjectCollectives(out: RankOutcome[]): void {
  expect(
    out.every((o) => o.code === 0),
    explain(out),
  ).toBe(true);
  const results = out.map((o) => o.results[0] as Result);
  // ranks 1 and 2 also check the subgroup [1, 2]'s, sources and destinations given as global ranks
  expect(results.map((r) => [r.failures, r.checks])).toEqual([
    [[], 6],
    [[], 10],
    [[], 10],
  ]);
  const [r0, r1, r2] = results.map((r) => r.errors);
  const sendFailed = (me: number, them: number, why: string) =>
    `InvalidArgumentError: rank ${me}: ${why} rank ${them} could not send its value`;
  for (const [me, e] of [r0, r1, r2].entries()) {
    expect(e.allGather).toContain(sendFailed(me, 1, 'allGatherObject:'));
    expect(e.broadcast).toContain(sendFailed(me, 1, 'broadcastObject:'));
    expect(e.scatter).toContain(sendFailed(me, 0, 'scatterObject:'));
    expect(e.noOptions).toBe(
      'InvalidArgumentError: broadcastObject: takes its options ({ src, group }) after the value',
    );
    // before: barrier({ timeoutMs }) waited the group's whole timeout without a word (probe BW)
    expect(e.barrier).toMatch(/^InvalidArgumentError: rank \d: barrier takes no arguments \(1 given\)/);
  }
  // the rank that failed says why; the others point to it
  expect(r1.allGather).toMatch(
    /could not send its value \(the structured clone refuses it: .*could not be cloned\.\)$/,
  );
  expect(r0.allGather).toMatch(/\(see rank 1's error\)$/);
  expect(r0.scatter).toMatch(/\(values must be an array of 3 values, one per member\)$/);
  // gather: dst sees every rank's words and tells the others which one could not send (rank 2 returned null)
  expect([r0.gather, r1.gather, r2.gather].map((e) => e.split(' (')[0])).toEqual([
    sendFailed(0, 1, 'gatherObject:'),
    sendFailed(1, 1, 'gatherObject:'),
    sendFailed(2, 1, 'gatherObject:'),
  ]);
}
