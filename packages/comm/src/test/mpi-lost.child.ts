import { type CommError, destroyProcessGroup, initProcessGroup } from '../index.js';

/**
 * Under mpirun with the mpi backend, rank 2 never joins an all-reduce the others start:
 *   skip – it idles; the others raise CommTimeoutError (timeout 1.5 s), then refuse a later
 *          call, and exit without MPI_Finalize (the call is stuck in MPI)
 *   kill – it kills itself (SIGKILL); the others wait with a 120 s timeout
 *   exit – it calls process.exit(1) without destroyProcessGroup (a script ending on an error)
 * Either way mpirun must end the job by itself (the test gives it less than 120 s).
 */
const mode = process.argv[2];
const g = await initProcessGroup({ backend: 'mpi', timeoutMs: mode === 'skip' ? 1500 : 120_000 });
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify({ rank: g.rank, ...r })}`);
const attempt = async (phase: string, fn: () => Promise<unknown>) => {
  try {
    await fn();
    report({ phase, name: 'ok' });
  } catch (e) {
    report({ phase, name: (e as Error).name, message: (e as Error).message, ranks: (e as CommError).ranks });
  }
};
if (g.rank === 2) {
  if (mode === 'kill') process.kill(process.pid, 'SIGKILL');
  if (mode === 'exit') process.exit(1);
  setInterval(() => {}, 1000);
} else {
  await attempt('allReduce', () => g.allReduce(new Float32Array(4)).wait());
  await attempt('later', () => g.barrier().wait());
  await destroyProcessGroup();
}
