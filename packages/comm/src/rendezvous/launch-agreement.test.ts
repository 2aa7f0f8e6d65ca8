import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../errors.js';
import { readLaunchEnv } from './env.js';
import { placeFromOptions, refuseNonMpiLaunch, worldClash } from './launch-agreement.js';

const torchrun = { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' };
const mpirun = { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2' };

describe('the world given against the launcher’s (probe V)', () => {
  // was: { rank: 0, worldSize: 1 } under a 2-rank launcher gave each process a world of one, training alone
  it('initProcessGroup options must agree with the launch variables; without a launcher they stand alone', () => {
    const env = readLaunchEnv(torchrun);
    expect(() => placeFromOptions({ rank: 0, worldSize: 1 }, env)).toThrow(InvalidArgumentError);
    expect(() => placeFromOptions({ worldSize: 1 }, env)).toThrow(
      /^rank 1: initProcessGroup: given rank 1 of 1, but the launcher started this process as rank 1 of 2/,
    );
    expect(placeFromOptions({ rank: 1, worldSize: 2 }, env)).toEqual({ rank: 1, worldSize: 2 });
    expect(placeFromOptions({}, env)).toEqual({ rank: 1, worldSize: 2 });
    expect(placeFromOptions({ rank: 0, worldSize: 1 }, readLaunchEnv({}))).toEqual({ rank: 0, worldSize: 1 });
    expect(() => placeFromOptions({ rank: 3, worldSize: 2 }, readLaunchEnv({}))).toThrow(/outside a world of 2/);
  });

  // was: each rank of ddp-run under DDP_COMM_BACKEND=mpi an MPI world of one; options and WORLD_SIZE ignored
  it("the mpi backend: ranks of a launcher that starts no MPI job refused; MPI's world against the others'", () => {
    expect(() => refuseNonMpiLaunch(readLaunchEnv(torchrun), torchrun)).toThrow(/mpirun -np 2/);
    expect(() => refuseNonMpiLaunch(readLaunchEnv(mpirun), mpirun)).not.toThrow();
    expect(() => refuseNonMpiLaunch(readLaunchEnv({}), {})).not.toThrow();
    expect(worldClash({}, readLaunchEnv(mpirun), 1, 2, mpirun)).toBeNull();
    expect(worldClash({ worldSize: 4 }, readLaunchEnv(mpirun), 1, 2, mpirun)).toBe('the options say a world of 4');
    const extra = { ...mpirun, WORLD_SIZE: '3' };
    expect(worldClash({}, readLaunchEnv(extra), 1, 2, extra)).toBe('RANK / WORLD_SIZE say a world of 3');
    expect(worldClash({ rank: 0 }, readLaunchEnv(torchrun), 0, 1, torchrun)).toBe(
      'the torchrun variables say a world of 2, the torchrun variables say rank 1, RANK / WORLD_SIZE say a world ' +
        'of 2, RANK / WORLD_SIZE say rank 1',
    );
  });

  // was: under srun without --ntasks-per-node every rank's local world was the whole world; an unreadable
  // LOCAL_WORLD_SIZE was taken for the world size
  it('Slurm tasks on this node from the step’s per-node list; an unreadable local size refused', () => {
    const srun = { SLURM_PROCID: '3', SLURM_NTASKS: '5', SLURM_LOCALID: '0', SLURM_NODEID: '1' };
    expect(readLaunchEnv({ ...srun, SLURM_TASKS_PER_NODE: '3,2' }).localWorldSize).toBe(2);
    expect(readLaunchEnv({ ...srun, SLURM_NTASKS: '4', SLURM_TASKS_PER_NODE: '2(x2)' }).localWorldSize).toBe(2);
    const inherited = { ...srun, SLURM_NTASKS: '2', SLURM_PROCID: '1', SLURM_NTASKS_PER_NODE: '4' };
    expect(readLaunchEnv({ ...inherited, SLURM_STEP_TASKS_PER_NODE: '1(x2)' }).localWorldSize).toBe(1);
    expect(() => readLaunchEnv({ ...torchrun, LOCAL_WORLD_SIZE: 'abc' })).toThrow(/LOCAL_WORLD_SIZE=abc/);
  });
});
