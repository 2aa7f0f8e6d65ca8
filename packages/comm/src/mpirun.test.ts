import { findFreePort, mpirunMissing, runMpirun } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

const missing = mpirunMissing();
if (missing) console.log(`mpirun test skipped: ${missing}`);

describe.skipIf(missing !== null)('mpirun -np 3 forms a world without ddp-run', () => {
  it('every rank passes an allReduce check, ranks taken from OMPI_COMM_WORLD_*', async () => {
    const env = { MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(await findFreePort()), DDP_SECRET: 'mpi-test' };
    const out = await runMpirun({
      np: 3,
      script: new URL('./test/mpi.child.ts', import.meta.url),
      env,
      timeoutMs: 60_000,
    });
    expect(out[0]?.code, out.map((o) => o.stderr).join('\n')).toBe(0);
    for (const [rank, o] of out.entries()) expect(o.results).toEqual([{ rank, size: 3, source: 'openmpi', ok: true }]);
  }, 90_000);
});
