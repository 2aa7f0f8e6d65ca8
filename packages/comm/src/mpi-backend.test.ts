import { explain, mpirunMissing, type RankOutcome, runMpirun } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, initProcessGroup } from './index.js';
import { wrongAgreement, wrongAverages } from './test/agreement-expect.js';
import { BAD_CALLS, MISMATCHES } from './test/mismatches.js';
import { mpiAddonMissing } from './test/mpi-addon.js';

const missing = mpirunMissing() ?? (await mpiAddonMissing());
if (missing) console.log(`mpi backend tests skipped: ${missing}`);
const MPI = { DDP_COMM_BACKEND: 'mpi' };

interface Summary {
  checks: number;
  failures: string[];
}
const summaries = (out: RankOutcome[]) => out.map((o) => o.results[0] as Summary | undefined);

describe('backend selection', () => {
  it('an unknown backend is an InvalidArgumentError naming the choices', async () => {
    const err = await initProcessGroup({ backend: 'nccl' as 'mpi' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as Error).message).toMatch(/unknown backend "nccl" \(expected 'default' or 'mpi'\)/);
  });
});

/**
 * initProcessGroup({ backend: 'mpi' }) under real `mpirun -np N` (DDP_COMM_BACKEND=mpi selects it
 * for the scripts the other backends run): the same checks, the same typed errors.
 */
describe.skipIf(missing !== null)("the 'mpi' backend under mpirun", () => {
  for (const np of [2, 3, 4]) {
    it(`-np ${np}: every collective, op and dtype at sizes 0, 1, 7, bit-exact`, async () => {
      const out = await runMpirun({
        np,
        script: new URL('./test/collectives.child.ts', import.meta.url),
        env: MPI,
        timeoutMs: 60_000,
      });
      expect(out[0]?.code, explain(out)).toBe(0);
      for (const s of summaries(out)) {
        expect(s?.failures).toEqual([]);
        expect(s?.checks).toBeGreaterThan(250);
      }
    }, 70_000);
  }

  it('-np 4: 200 random collectives, up to 8 in flight, on the world and on two kinds of subgroups', async () => {
    const out = await runMpirun({
      np: 4,
      script: new URL('./test/random.child.ts', import.meta.url),
      args: ['200', '4242'],
      env: MPI,
      timeoutMs: 60_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    for (const s of summaries(out)) {
      expect(s?.failures).toEqual([]);
      expect(s?.checks).toBeGreaterThan(200);
    }
  }, 70_000);

  it('-np 3: calls that differ or are invalid on one rank raise a typed error on every rank, then on every later call', async () => {
    const args = [...Object.keys(MISMATCHES), ...Object.keys(BAD_CALLS)];
    const out = await runMpirun({
      np: 3,
      script: new URL('./test/agreement.child.ts', import.meta.url),
      args,
      env: MPI,
      timeoutMs: 60_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    expect(wrongAgreement(out)).toEqual([]);
  }, 70_000);

  it('-np 3: AVG near the dtype limit is finite, ordinary averages bit-exact, equal on every rank', async () => {
    const out = await runMpirun({
      np: 3,
      script: new URL('./test/average.child.ts', import.meta.url),
      env: MPI,
      timeoutMs: 60_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    expect(wrongAverages(out)).toEqual([]);
  }, 70_000);

  it('-np 2: MAX/MIN propagate a NaN in every float dtype; Works back to back on one array see each other; sends and receives at once past the eager limit; a receive of the wrong size fails there, then on both', async () => {
    const out = await runMpirun({
      np: 2,
      script: new URL('./test/mpi-edges.child.ts', import.meta.url),
      timeoutMs: 60_000,
    });
    expect(out[0]?.code, explain(out)).toBe(0);
    const [r0, r1] = out.map(
      (o) => o.results[0] as Summary & { shortReceive: string; after: string; bigGather: string },
    );
    for (const r of [r0, r1]) expect(r?.failures).toEqual([]);
    expect(r0?.checks).toBe(39);
    expect(r0?.shortReceive).toBe('none');
    expect(r1?.shortReceive).toMatch(
      /^CollectiveMismatchError: rank 1: .*rank 0 sent 16 bytes \(tag 0\), this receive expects 24/,
    );
    expect([r0?.after, r1?.after]).toEqual(['GroupAbortedError', 'CollectiveMismatchError']);
    // probe BM: the addon's int displacements overflowed (a wrong-sized output, memory past its end)
    for (const r of [r0, r1])
      expect(r?.bigGather).toMatch(/^InvalidArgumentError: rank \d: allGather: .* add up to 2147483650 elements/);
    // probe CW: a send in flight at destroyProcessGroup was reported failed while its data arrived
    expect(out.map((o) => (o.results[1] as { inFlight: string }).inFlight)).toEqual(['completed', 'received']);
  }, 70_000);

  it('groups made in different orders, a negative tag, an int32 send met by a float32 receive: refused', async () => {
    const run = (np: number, scenario: string) =>
      runMpirun({
        np,
        script: new URL('./test/mpi-groups.child.ts', import.meta.url),
        args: [scenario],
        timeoutMs: 60_000,
      });
    // before: rank 0's [0, 1] summed rank 2's data and its [0, 2] rank 1's (MPI_Comm_split pairs calls by order)
    for (const o of await run(3, 'orders')) {
      const r = o.results[0] as Record<string, { value?: boolean; error?: string }>;
      // every group this rank is a member of is refused; the other call returns null (not a member)
      for (const g of [r.group0, r.group1]) {
        if (g?.value === false) continue;
        expect(g?.error, explain([o])).toMatch(/^InvalidArgumentError: .*made their groups in different orders/);
      }
    }
    // before: tag -1 was MPI_ANY_TAG on a receive, and MPI_ERR_TAG on a send broke MPI for every later call
    for (const o of await run(2, 'tags')) {
      const r = o.results[0] as { negative: { error?: string }; received: number };
      expect(r.negative.error).toMatch(/tag must be an integer in \[0, 2\^24\), got -1/);
      expect(r.received).toBe(5);
    }
    // before: the int32 bits were read as float32 (9.8e-45)
    const dtypes = await run(2, 'dtypes');
    const received = (dtypes[1]?.results[0] as { received?: { value?: number[]; error?: string } } | undefined)
      ?.received;
    expect(received?.value, explain(dtypes)).toBeUndefined();
    expect(received?.error).toMatch(/^CommTimeoutError/);
  }, 120_000);

  it("-np 4: a subgroup duplicated by its members only (a ZeRO or FSDP save's group), then the world's sums", async () => {
    // before: ZeRO's and FSDP's saves made it with newGroup by the members only: a misleading
    // "different orders" error on every rank, then MPI unusable ("descriptor of 10 words, expected 14")
    const out = await runMpirun({
      np: 4,
      script: new URL('./test/mpi-groups.child.ts', import.meta.url),
      args: ['duplicate'],
      timeoutMs: 60_000,
    });
    const sums = out.map((o) => (o.results[0] as { sums?: { value?: number[] } } | undefined)?.sums?.value);
    expect(sums, explain(out)).toEqual([
      [3, 10],
      [3, 10],
      [7, 10],
      [7, 10],
    ]);
  }, 70_000);

  it('-np 2: two groups whose calls the ranks issue in opposite orders both complete', async () => {
    // probe DD: one MPI thread for every group ran each rank's calls in its own order: rank 0 waited in the
    // duplicate's sum, rank 1 in the world's, until the timeout (a checkpoint saved in the background, lost)
    const out = await runMpirun({
      np: 2,
      script: new URL('./test/mpi-groups.child.ts', import.meta.url),
      args: ['interleaved'],
      timeoutMs: 60_000,
    });
    const sums = out.map((o) => (o.results[0] as { sums?: { value?: number[]; error?: string } } | undefined)?.sums);
    expect(sums, explain(out)).toEqual([{ value: [3, 30] }, { value: [3, 30] }]);
  }, 70_000);

  it('a rank that never joins: CommTimeoutError on the others, later calls refused, and mpirun ends the job', async () => {
    const out = await runMpirun({
      np: 3,
      script: new URL('./test/mpi-lost.child.ts', import.meta.url),
      args: ['skip'],
      timeoutMs: 60_000,
    });
    // ended by mpirun (the idle rank never exits by itself), not by the harness's kill
    expect(out[0]?.signal, explain(out)).toBeNull();
    for (const o of out.slice(0, 2)) {
      const [first, later] = o.results as { name: string; message: string; ranks: number[] }[];
      expect(first?.name, first?.message).toBe('CommTimeoutError');
      expect(first?.message).toMatch(new RegExp(`rank ${o.rank}: allReduce .*1500 ms`));
      expect(first?.ranks).toContain(2);
      expect(later?.name).toBe('CommTimeoutError');
      expect(later?.message).toMatch(/barrier refused/);
    }
  }, 70_000);

  // exit: it never ended before: exit()'s destructors waited for the addon's MPI thread, asleep for good
  it.each([
    ['kill', 'killed with SIGKILL'],
    ['exit', 'calling process.exit(1) without destroyProcessGroup'],
  ])(
    'a rank %s while the others wait in an all-reduce (%s): mpirun ends the job, nobody hangs',
    async (mode) => {
      const out = await runMpirun({
        np: 3,
        script: new URL('./test/mpi-lost.child.ts', import.meta.url),
        args: [mode],
        timeoutMs: 60_000,
      });
      expect(out[0]?.signal, explain(out)).toBeNull();
      expect(out[0]?.code).not.toBe(0);
    },
    70_000,
  );
});
