import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN_ID, firstSlurmHost, INSECURE_DEFAULT_SECRET, readLaunchEnv } from './env.js';

describe('readLaunchEnv', () => {
  it('reads the torchrun variables first', () => {
    const e = readLaunchEnv({ RANK: '2', WORLD_SIZE: '4', LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '2', MASTER_ADDR: '10.0.0.1', MASTER_PORT: '1234', DDP_SECRET: 's', OMPI_COMM_WORLD_RANK: '9' });
    expect(e).toMatchObject({ rank: 2, worldSize: 4, localRank: 0, localWorldSize: 2, masterAddr: '10.0.0.1', masterPort: 1234, secret: 's', source: 'torchrun' });
  });
  it("falls back to Open MPI's variables", () => {
    const e = readLaunchEnv({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '3', OMPI_COMM_WORLD_LOCAL_RANK: '1', OMPI_COMM_WORLD_LOCAL_SIZE: '3' });
    expect(e).toMatchObject({ rank: 1, worldSize: 3, localRank: 1, localWorldSize: 3, masterAddr: '127.0.0.1', masterPort: 29500, source: 'openmpi', secret: INSECURE_DEFAULT_SECRET });
  });
  it("falls back to Slurm's variables and its first node", () => {
    const e = readLaunchEnv({ SLURM_PROCID: '5', SLURM_NTASKS: '8', SLURM_LOCALID: '1', SLURM_NODELIST: 'gpu[03-06,09],cpu1', SLURM_NTASKS_PER_NODE: '2(x4)' });
    expect(e).toMatchObject({ rank: 5, worldSize: 8, localRank: 1, localWorldSize: 2, masterAddr: 'gpu03', source: 'slurm' });
  });
  it('parses Slurm node lists', () => {
    expect(firstSlurmHost('node7')).toBe('node7');
    expect(firstSlurmHost('a[1-2],b')).toBe('a1');
    expect(firstSlurmHost('x[10,12]')).toBe('x10');
  });
  it('is a world of one without any launcher', () => {
    expect(readLaunchEnv({})).toMatchObject({ rank: 0, worldSize: 1, source: 'default' });
  });
  it("reads the run id: DDP_RUN_ID, torchrun's, the mpirun job, the Slurm step, else torchrun's default", () => {
    expect(readLaunchEnv({ DDP_RUN_ID: 'a', TORCHELASTIC_RUN_ID: 'b' }).runId).toBe('a');
    expect(readLaunchEnv({ RANK: '0', WORLD_SIZE: '2', TORCHELASTIC_RUN_ID: 'b' }).runId).toBe('b');
    const mpi = { OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '2', OMPI_MCA_ess_base_jobid: '77' };
    expect(readLaunchEnv(mpi).runId).toBe('openmpi-77');
    const slurm = { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_ID: '9', SLURM_STEP_ID: '1' };
    expect(readLaunchEnv(slurm).runId).toBe('slurm-9.1');
    expect(readLaunchEnv({ RANK: '0', WORLD_SIZE: '2' }).runId).toBe(DEFAULT_RUN_ID);
    expect(() => readLaunchEnv({ DDP_RUN_ID: 'x'.repeat(256) })).toThrow(/longer than 255 bytes/);
  });
  it('rejects garbage numbers', () => {
    expect(() => readLaunchEnv({ RANK: 'x', WORLD_SIZE: '2' })).toThrow(/RANK/);
  });
});
