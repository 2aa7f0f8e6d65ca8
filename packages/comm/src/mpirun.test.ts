import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from './test/spawn-world.js';

const mpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' });
const available = mpirun.status === 0;
if (!available) console.log('mpirun test skipped: mpirun (Open MPI) is not installed (apt-get install openmpi-bin)');

describe.skipIf(!available)('mpirun -np 3 forms a world without ddp-run', () => {
  it('every rank passes an allReduce check, ranks taken from OMPI_COMM_WORLD_*', async () => {
    const script = fileURLToPath(new URL('./test/mpi.child.ts', import.meta.url));
    const port = await freePort();
    // no torchrun variables: the ranks must come from Open MPI's
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'].includes(k)));
    const args = ['--allow-run-as-root', '--oversubscribe', '-np', '3', '-x', 'MASTER_ADDR=127.0.0.1', '-x', `MASTER_PORT=${port}`, '-x', 'DDP_SECRET=mpi-test'];
    const child = spawn('mpirun', [...args, process.execPath, '--conditions=@ddp/source', '--import', 'tsx', script], {
      env: { ...env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearTimeout(timer);
    const results = out
      .split('\n')
      .filter((l) => l.startsWith('RESULT '))
      .map((l) => JSON.parse(l.slice(7)) as { rank: number; size: number; source: string; ok: boolean });
    expect(code, `${out}\n${err}`).toBe(0);
    expect(results.map((r) => r.rank).sort()).toEqual([0, 1, 2]);
    for (const r of results) expect(r).toMatchObject({ size: 3, source: 'openmpi', ok: true });
  }, 90_000);
});
