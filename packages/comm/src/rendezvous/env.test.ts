import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN_ID, firstSlurmHost, INSECURE_DEFAULT_SECRET, readLaunchEnv } from './env.js';

describe('readLaunchEnv', () => {
  it('reads the torchrun variables first', () => {
    const e = readLaunchEnv({
      RANK: '2',
      WORLD_SIZE: '4',
      LOCAL_RANK: '0',
      LOCAL_WORLD_SIZE: '2',
      MASTER_ADDR: '10.0.0.1',
      MASTER_PORT: '1234',
      DDP_SECRET: 's',
      OMPI_COMM_WORLD_RANK: '9',
    });
    expect(e).toMatchObject({
      rank: 2,
      worldSize: 4,
      localRank: 0,
      localWorldSize: 2,
      masterAddr: '10.0.0.1',
      masterPort: 1234,
      secret: 's',
      source: 'torchrun',
    });
  });
  it("falls back to Open MPI's variables", () => {
    const e = readLaunchEnv({
      OMPI_COMM_WORLD_RANK: '1',
      OMPI_COMM_WORLD_SIZE: '3',
      OMPI_COMM_WORLD_LOCAL_RANK: '1',
      OMPI_COMM_WORLD_LOCAL_SIZE: '3',
    });
    expect(e).toMatchObject({
      rank: 1,
      worldSize: 3,
      localRank: 1,
      localWorldSize: 3,
      masterAddr: '127.0.0.1',
      masterPort: 29500,
      source: 'openmpi',
      secret: INSECURE_DEFAULT_SECRET,
    });
  });
  it("falls back to Slurm's variables and its first node", () => {
    const e = readLaunchEnv({
      SLURM_PROCID: '5',
      SLURM_NTASKS: '8',
      SLURM_LOCALID: '1',
      SLURM_NODELIST: 'gpu[03-06,09],cpu1',
      SLURM_NTASKS_PER_NODE: '2(x4)',
    });
    expect(e).toMatchObject({
      rank: 5,
      worldSize: 8,
      localRank: 1,
      localWorldSize: 2,
      masterAddr: 'gpu03',
      source: 'slurm',
    });
  });
  it('parses Slurm node lists', () => {
    expect(firstSlurmHost('node7')).toBe('node7');
    expect(firstSlurmHost('a[1-2],b')).toBe('a1');
    expect(firstSlurmHost('x[10,12]')).toBe('x10');
    expect(firstSlurmHost('rack[2-3]-n[05-06,9],login')).toBe('rack2-n05');
    expect(firstSlurmHost('10.1.2.[7-9]')).toBe('10.1.2.7');
  });
  it("takes the master from the srun step's first node, not the allocation's", () => {
    const step = { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_NODELIST: 'n[1-4]', SLURM_STEP_NODELIST: 'n[3-4]' };
    expect(readLaunchEnv(step).masterAddr).toBe('n3');
  });
  it('is a world of one without any launcher', () => {
    expect(readLaunchEnv({})).toMatchObject({ rank: 0, worldSize: 1, source: 'default' });
  });
  it('refuses a rank without its world size, or the reverse, as torch does (was: rank 0 of 1, silently)', () => {
    const halves: [Record<string, string>, RegExp][] = [
      [{ RANK: '1' }, /RANK=1 is set but WORLD_SIZE is not/],
      [{ WORLD_SIZE: '2', LOCAL_RANK: '0' }, /WORLD_SIZE=2 is set but RANK is not/],
      [{ OMPI_COMM_WORLD_RANK: '1' }, /OMPI_COMM_WORLD_RANK=1 is set but OMPI_COMM_WORLD_SIZE is not/],
    ];
    for (const [env, message] of halves) expect(() => readLaunchEnv(env)).toThrow(message);
    // an salloc shell sets the task count but no task id: one process, as before
    expect(readLaunchEnv({ SLURM_NTASKS: '4' })).toMatchObject({ rank: 0, worldSize: 1, source: 'default' });
  });
  it("reads the run id: DDP_RUN_ID, torchrun's, the mpirun job, the Slurm step, else torchrun's default", () => {
    expect(readLaunchEnv({ DDP_RUN_ID: 'a', TORCHELASTIC_RUN_ID: 'b' }).runId).toBe('a');
    expect(readLaunchEnv({ RANK: '0', WORLD_SIZE: '2', TORCHELASTIC_RUN_ID: 'b' }).runId).toBe('b');
    const mpi = { OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '2', OMPI_MCA_ess_base_jobid: '77' };
    expect(readLaunchEnv(mpi).runId).toBe('openmpi-77');
    const slurm = { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_ID: '9', SLURM_STEP_ID: '1' };
    expect(readLaunchEnv(slurm).runId).toBe('slurm-9.1');
    expect(readLaunchEnv({ RANK: '0', WORLD_SIZE: '2' }).runId).toBe(DEFAULT_RUN_ID);
    // each restart of ddp-run's is an attempt of its own
    expect(readLaunchEnv({ DDP_RUN_ID: 'a', DDP_RESTART_COUNT: '2' }).runId).toBe('a#attempt-2');
    expect(readLaunchEnv({ DDP_RUN_ID: 'a', DDP_RESTART_COUNT: '0' }).runId).toBe('a');
    // a long id that fits alone but not with the suffix: hashed, the same on every rank (was: refused at restart)
    const long = readLaunchEnv({ DDP_RUN_ID: 'x'.repeat(250), DDP_RESTART_COUNT: '1' }).runId;
    expect(long).toMatch(/^[0-9a-f]{64}#attempt-1$/);
    expect(() => readLaunchEnv({ DDP_RUN_ID: 'x'.repeat(256) })).toThrow(/longer than 255 bytes/);
  });
  it.each<[string, Record<string, string>, Record<string, unknown>]>([
    [
      'Kubeflow Trainer v2, one process per node started without ddp-run',
      {
        PET_NNODES: '3',
        PET_NPROC_PER_NODE: '1',
        PET_NODE_RANK: '2',
        PET_MASTER_ADDR: 'tj-node-0-0.tj',
        PET_MASTER_PORT: '29400',
      },
      {
        rank: 2,
        worldSize: 3,
        localRank: 0,
        localWorldSize: 1,
        masterAddr: 'tj-node-0-0.tj',
        masterPort: 29400,
        runId: 'kubeflow-tj-node-0-0.tj',
        source: 'kubeflow',
      },
    ],
    [
      'PyTorchJob ≥ 1.7 (RANK counts pods, PET_* too), started without ddp-run',
      {
        RANK: '1',
        WORLD_SIZE: '2',
        MASTER_ADDR: 'pj-master-0',
        MASTER_PORT: '23456',
        PET_NNODES: '2',
        PET_NODE_RANK: '1',
        PET_NPROC_PER_NODE: '1',
      },
      { rank: 1, worldSize: 2, localRank: 0, masterAddr: 'pj-master-0', masterPort: 23456, source: 'kubeflow' },
    ],
    [
      "a rank of ddp-run inside a Kubeflow pod: its own variables, not the pod's",
      {
        RANK: '3',
        WORLD_SIZE: '4',
        LOCAL_RANK: '1',
        LOCAL_WORLD_SIZE: '2',
        MASTER_ADDR: 'm',
        PET_NNODES: '2',
        PET_NPROC_PER_NODE: '2',
      },
      { rank: 3, worldSize: 4, localRank: 1, source: 'torchrun' },
    ],
    [
      'old PyTorchJob: RANK, WORLD_SIZE count pods of one process',
      { RANK: '2', WORLD_SIZE: '3', MASTER_ADDR: 'pj-master-0', MASTER_PORT: '23456' },
      { rank: 2, worldSize: 3, masterAddr: 'pj-master-0', source: 'torchrun' },
    ],
    [
      'srun --ntasks-per-node=2 node train.ts',
      {
        SLURM_PROCID: '3',
        SLURM_NTASKS: '4',
        SLURM_LOCALID: '1',
        SLURM_NTASKS_PER_NODE: '2',
        SLURM_STEP_NODELIST: 'c[1-2]',
        SLURM_JOB_ID: '7',
        SLURM_STEP_ID: '0',
      },
      { rank: 3, worldSize: 4, localRank: 1, localWorldSize: 2, masterAddr: 'c1', runId: 'slurm-7.0', source: 'slurm' },
    ],
  ])('maps %s', (_what, env, want) => {
    expect(readLaunchEnv(env)).toMatchObject(want);
  });
  it('refuses a Kubeflow pod of several processes per node started without ddp-run', () => {
    for (const nproc of ['2', 'auto']) {
      expect(() => readLaunchEnv({ PET_NNODES: '2', PET_NPROC_PER_NODE: nproc, RANK: '0', WORLD_SIZE: '4' })).toThrow(
        /start the script with ddp-run/,
      );
    }
  });
  it('advertises the address of DDP_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME); DDP_BIND_ADDR wins', () => {
    const nic = (address: string, family: 'IPv4' | 'IPv6') => ({
      address,
      family,
      netmask: '',
      mac: '',
      internal: false,
      cidr: null,
      scopeid: 0,
    });
    const interfaces = {
      lo: [nic('127.0.0.1', 'IPv4')],
      ib0: [nic('fd00::5', 'IPv6'), nic('10.9.0.5', 'IPv4')],
      v6: [nic('fd00::6', 'IPv6')],
    };
    expect(readLaunchEnv({}, interfaces).bindAddr).toBeUndefined();
    expect(readLaunchEnv({ DDP_SOCKET_IFNAME: 'ib0' }, interfaces).bindAddr).toBe('10.9.0.5');
    expect(readLaunchEnv({ GLOO_SOCKET_IFNAME: 'v6,ib0' }, interfaces).bindAddr).toBe('fd00::6');
    expect(readLaunchEnv({ DDP_SOCKET_IFNAME: 'ib0', GLOO_SOCKET_IFNAME: 'lo' }, interfaces).bindAddr).toBe('10.9.0.5');
    expect(readLaunchEnv({ DDP_SOCKET_IFNAME: 'ib0', DDP_BIND_ADDR: '10.1.1.1' }, interfaces).bindAddr).toBe(
      '10.1.1.1',
    );
    expect(() => readLaunchEnv({ DDP_SOCKET_IFNAME: 'eth7' }, interfaces)).toThrow(
      /DDP_SOCKET_IFNAME=eth7: no interface eth7 .*lo, ib0, v6/,
    );
  });
  // probe AG: RANK=0 WORLD_SIZE=1 left in the environment were read over mpirun's: two worlds of one, exit 0
  it("refuses RANK and WORLD_SIZE no launcher set that disagree with Open MPI's or Slurm's", () => {
    const leftover = { RANK: '0', WORLD_SIZE: '1' };
    const mpirun = { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2', OMPI_COMM_WORLD_LOCAL_RANK: '1' };
    expect(() => readLaunchEnv({ ...leftover, ...mpirun })).toThrow(
      /^RANK=0 and WORLD_SIZE=1 disagree with OMPI_COMM_WORLD_RANK=1 and OMPI_COMM_WORLD_SIZE=2, and no launcher/,
    );
    const srun = { SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_JOB_ID: '7' };
    expect(() => readLaunchEnv({ ...leftover, ...srun })).toThrow(/disagree with SLURM_PROCID=1 and SLURM_NTASKS=2/);
    // set alike by the user's script, or by a launcher (ddp-run under srun: its world counts every node's ranks)
    expect(readLaunchEnv({ RANK: '1', WORLD_SIZE: '2', ...mpirun }).rank).toBe(1);
    expect(readLaunchEnv({ ...leftover, ...srun, DDP_LAUNCH_ID: 'x', LOCAL_RANK: '0' }).worldSize).toBe(1);
    expect(readLaunchEnv({ RANK: '3', WORLD_SIZE: '4', ...srun, TORCHELASTIC_RUN_ID: 'j' }).rank).toBe(3);
  });

  it('rejects garbage numbers', () => {
    expect(() => readLaunchEnv({ RANK: 'x', WORLD_SIZE: '2' })).toThrow(/RANK/);
    // probe CS: Number() read these as 1, where torch's int() raises
    for (const v of ['0x1', '1.0', '1e0', '-0'])
      expect(() => readLaunchEnv({ RANK: v, WORLD_SIZE: '2' })).toThrow(`RANK=${v} is not a non-negative integer`);
    expect(readLaunchEnv({ RANK: ' 1 ', WORLD_SIZE: '+2' }).rank).toBe(1);
  });
  it('refuses a rank outside its world, from every launcher', () => {
    const outside: [Record<string, string>, RegExp][] = [
      [{ RANK: '4', WORLD_SIZE: '4', LOCAL_RANK: '0' }, /RANK=4 is outside WORLD_SIZE=4/],
      [{ RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '2', LOCAL_WORLD_SIZE: '2' }, /LOCAL_RANK=2 .*LOCAL_WORLD_SIZE=2/],
      [{ RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '3' }, /LOCAL_RANK=3 is outside WORLD_SIZE=2/],
      [{ RANK: '0', WORLD_SIZE: '0' }, /RANK=0 is outside WORLD_SIZE=0/],
      [{ OMPI_COMM_WORLD_RANK: '3', OMPI_COMM_WORLD_SIZE: '2' }, /OMPI_COMM_WORLD_RANK=3/],
      [
        {
          OMPI_COMM_WORLD_RANK: '1',
          OMPI_COMM_WORLD_SIZE: '4',
          OMPI_COMM_WORLD_LOCAL_RANK: '1',
          OMPI_COMM_WORLD_LOCAL_SIZE: '1',
        },
        /OMPI_COMM_WORLD_LOCAL_RANK=1 is outside OMPI_COMM_WORLD_LOCAL_SIZE=1/,
      ],
      [{ SLURM_PROCID: '8', SLURM_NTASKS: '8' }, /SLURM_PROCID=8 is outside SLURM_NTASKS=8/],
      [{ SLURM_PROCID: '1', SLURM_NTASKS: '8', SLURM_LOCALID: '2', SLURM_NTASKS_PER_NODE: '2(x4)' }, /SLURM_LOCALID=2/],
      [{ PET_NNODES: '2', PET_NPROC_PER_NODE: '1', PET_NODE_RANK: '2' }, /PET_NODE_RANK=2 is outside PET_NNODES=2/],
      // probe CS: the local size came from SLURM_TASKS_PER_NODE, the message named SLURM_NTASKS=1
      [
        { SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_LOCALID: '1', SLURM_TASKS_PER_NODE: '1(x2)' },
        /SLURM_LOCALID=1 is outside SLURM_TASKS_PER_NODE=1/,
      ],
    ];
    for (const [env, message] of outside) expect(() => readLaunchEnv(env)).toThrow(message);
    expect(readLaunchEnv({ RANK: '3', WORLD_SIZE: '4', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' }).localRank).toBe(1);
  });
});
