import { describe, expect, it } from 'vitest';
import { DESC_FIXED, Kind, loadMpi, Rule, Status, whyMissing } from './index.js';

const mpi = loadMpi();
if (!mpi) console.log(`@ddp/mpi tests skipped: ${whyMissing()}`);

/** The addon in a world of one (an MPI singleton: no mpirun needed); worlds of 2–4 run in @ddp/comm's tests. */
describe.skipIf(!mpi)('@ddp/mpi in a world of one', () => {
  const addon = mpi as NonNullable<typeof mpi>;
  const desc = (op: number, count: number, failed = 0) => Int32Array.from([op, 1, 1, 0, count, failed, 0, 0]);

  it('starts MPI, reduces in place, refuses a call flagged as failed, and finalises', async () => {
    const [status, , , , rank, size] = await addon.call(Kind.init, 0, 0, 0, 0, 0, null, null, null, null);
    expect([status, rank, size]).toEqual([Status.ok, 0, 1]);
    expect(() => addon.call(Kind.init, 0, 0, 0, 0, 0, null, null, null, null)).toThrow(/init called twice/);
    const a = new Float32Array([1, Number.NaN, 3]);
    const [ok, all] = await addon.call(Kind.allReduce, 0, Rule.sameCount, 1, 3, 0, desc(1, 3), null, a, null);
    expect(ok).toBe(Status.ok);
    expect(all?.length).toBe(DESC_FIXED + 2);
    expect([...a]).toEqual([1, Number.NaN, 3]);
    const [refused] = await addon.call(Kind.allReduce, 0, Rule.sameCount, 1, 1, 0, desc(1, 3, 2), null, a, null);
    expect(refused).toBe(Status.refused);
    // a descriptor of the wrong length is an error, not a read past its end
    const [bad, , , message] = await addon.call(
      Kind.barrier,
      0,
      Rule.sameCall,
      1,
      0,
      0,
      Int32Array.from([11]),
      null,
      null,
      null,
    );
    expect(bad).toBe(Status.mpiFailed);
    expect(message).toMatch(/descriptor of 1 words, expected 8/);
    const [done] = await addon.call(Kind.finalize, 0, 0, 0, 0, 0, null, null, null, null);
    expect(done).toBe(Status.ok);
  });
});
