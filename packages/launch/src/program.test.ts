import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { LaunchOptions } from './options.js';
import { parseCommandLine } from './program.js';
import { rankScript } from './test/harness.js';

function parse(args: string[], env: Record<string, string> = {}): LaunchOptions {
  const parsed = parseCommandLine(args, env);
  if ('exitCode' in parsed) throw new Error(`exit ${parsed.exitCode}`);
  return parsed.options;
}

const fails = (args: string[], env: Record<string, string> = {}): number | undefined => {
  const parsed = parseCommandLine(args, env);
  return 'exitCode' in parsed ? parsed.exitCode : undefined;
};

/** A complete multi-node c10d command line but for the node rank. */
const c10dNodes = ['--rdzv-backend', 'c10d', '--rdzv-endpoint', 'h:29400', '--rdzv-id', 'j', '--secret', 's'];

describe('torchrun spellings', () => {
  it.each<[string, string[], Partial<LaunchOptions>]>([
    [
      'underscores, space',
      ['--nproc_per_node', '2', '--node_rank', '1', '--nnodes', '2'],
      { nprocPerNode: 2, nodeRank: 1, nnodes: 2 },
    ],
    [
      'underscores, =',
      ['--nproc_per_node=3', '--master_addr=h', '--master_port=1234'],
      { nprocPerNode: 3, masterAddr: 'h', masterPort: 1234 },
    ],
    ['--nnodes N:N', ['--nproc-per-node', '1', '--nnodes', '2:2'], { nnodes: 2 }],
    ['--nproc-per-node auto', ['--nproc-per-node', 'auto'], { nprocPerNode: availableParallelism() }],
    ['--nproc-per-node cpu', ['--nproc-per-node=cpu'], { nprocPerNode: availableParallelism() }],
    [
      '--rdzv-endpoint host:port',
      ['--nproc-per-node', '1', '--rdzv_endpoint', 'node0:29600'],
      { masterAddr: 'node0', masterPort: 29600 },
    ],
    [
      '--rdzv-endpoint host (c10d default port)',
      ['--nproc-per-node', '1', '--rdzv-endpoint', 'node0'],
      { masterAddr: 'node0', masterPort: 29400 },
    ],
    [
      '--rdzv-endpoint [v6]:port',
      ['--nproc-per-node', '1', '--rdzv-endpoint', '[fd00::1]:5'],
      { masterAddr: 'fd00::1', masterPort: 5 },
    ],
    [
      'c10d across nodes with --node-rank',
      ['--nproc-per-node', '1', '--nnodes', '2', '--node-rank', '1', ...c10dNodes],
      { nnodes: 2, nodeRank: 1 },
    ],
    [
      '--rdzv-backend c10d --rdzv-id',
      ['--nproc-per-node', '1', '--rdzv_backend', 'c10d', '--rdzv_id', 'j'],
      { rdzvId: 'j' },
    ],
    [
      '--log_dir, -r, --tee',
      ['--nproc-per-node', '2', '--log_dir', 'logs', '-r', '3', '--tee=0:1,1:2'],
      {
        logDir: 'logs',
        redirects: 3,
        tee: new Map([
          [0, 1],
          [1, 2],
        ]),
      },
    ],
    [
      '--standalone',
      ['--standalone', '--nproc_per_node', '2'],
      { nnodes: 1, masterPort: undefined, masterAddr: '127.0.0.1' },
    ],
  ])('%s', (_what, flags, want) => {
    expect(parse([...flags, rankScript, '--nproc_per_node', '9'])).toMatchObject({
      ...want,
      args: ['--nproc_per_node', '9'],
    });
  });

  it.each<[string, string[]]>([
    ['an elastic range', ['--nproc-per-node', '1', '--nnodes', '1:2']],
    ['gpu', ['--nproc-per-node', 'gpu']],
    ['--redirects 4', ['--nproc-per-node', '1', '--log-dir', 'l', '--redirects', '4']],
    ['an etcd backend', ['--nproc-per-node', '1', '--rdzv-backend', 'etcd']],
    // probe CS: torchrun's c10d recipe, the same command on every node: each took node rank 0
    ['c10d across nodes without --node-rank', ['--nproc-per-node', '1', '--nnodes', '2', ...c10dNodes]],
    ['--standalone with two nodes', ['--standalone', '--nproc-per-node', '1', '--nnodes', '2']],
    [
      'an endpoint that disagrees with --master-port',
      ['--nproc-per-node', '1', '--rdzv-endpoint', 'h:1', '--master-port', '2'],
    ],
  ])('refuses %s with exit 2', (_what, flags) => {
    expect(fails([...flags, rankScript])).toBe(2);
  });
});

const pod = { KUBERNETES_SERVICE_HOST: '10.0.0.1' };
const slurm = {
  SLURM_JOB_ID: '4242',
  SLURM_STEP_ID: '0',
  SLURM_NNODES: '4',
  SLURM_STEP_NUM_NODES: '2',
  SLURM_STEP_NUM_TASKS: '2',
  SLURM_NODEID: '1',
  SLURM_PROCID: '1',
  SLURM_STEP_NODELIST: 'gpu07,gpu09',
  SLURM_JOB_NODELIST: 'gpu[01,07,09,11]',
};

describe('scheduler variables fill in the launcher plan', () => {
  it.each<[string, Record<string, string>, string[], Partial<LaunchOptions>]>([
    [
      'Kubeflow Trainer v2 (PET_*), no flags at all',
      {
        ...pod,
        PET_NNODES: '3',
        PET_NPROC_PER_NODE: '2',
        PET_NODE_RANK: '2',
        PET_MASTER_ADDR: 'tj-node-0-0.tj',
        PET_MASTER_PORT: '29400',
      },
      [],
      {
        nnodes: 3,
        nprocPerNode: 2,
        nodeRank: 2,
        masterAddr: 'tj-node-0-0.tj',
        masterPort: 29400,
        rdzvId: 'kubeflow-tj-node-0-0.tj',
      },
    ],
    [
      'Kubeflow PyTorchJob (pods counted by WORLD_SIZE, RANK = pod index)',
      { ...pod, MASTER_ADDR: 'pj-master-0', MASTER_PORT: '23456', WORLD_SIZE: '4', RANK: '3' },
      ['--nproc-per-node', '2'],
      { nnodes: 4, nodeRank: 3, masterAddr: 'pj-master-0', masterPort: 23456, rdzvId: 'kubeflow-pj-master-0' },
    ],
    [
      'PyTorchJob ≥ 1.7 with nprocPerNode: PET_NNODES, not WORLD_SIZE (= pods × procs)',
      {
        ...pod,
        MASTER_ADDR: 'pj-master-0',
        MASTER_PORT: '23456',
        WORLD_SIZE: '8',
        RANK: '1',
        PET_NNODES: '4',
        PET_NODE_RANK: '1',
        PET_NPROC_PER_NODE: '2',
      },
      [],
      { nnodes: 4, nodeRank: 1, nprocPerNode: 2, masterAddr: 'pj-master-0' },
    ],
    [
      'Slurm step: node id, step node count, first node of the step, port and run id from the job',
      slurm,
      ['--nproc-per-node', '2'],
      { nnodes: 2, nodeRank: 1, masterAddr: 'gpu07', masterPort: 15000 + 4242, rdzvId: 'slurm-4242.0' },
    ],
    [
      // probe CS: two steps of one job run at once (a sweep) took one port, and one failed AddressInUseError
      'a second Slurm step of the job: a port of its own',
      { ...slurm, SLURM_STEP_ID: '1' },
      ['--nproc-per-node', '2'],
      { masterPort: 15000 + ((4242 + 1009) % 10000), rdzvId: 'slurm-4242.1' },
    ],
    [
      'Slurm with MASTER_ADDR/MASTER_PORT exported',
      { ...slurm, MASTER_ADDR: 'login', MASTER_PORT: '7000' },
      ['--nproc-per-node', '1'],
      { masterAddr: 'login', masterPort: 7000 },
    ],
    [
      'flags win over the scheduler',
      slurm,
      ['--nproc-per-node', '1', '--node_rank', '0', '--rdzv-id', 'mine'],
      { nodeRank: 0, rdzvId: 'mine', nnodes: 2 },
    ],
    [
      'mpirun, one ddp-run per node (--map-by ppr:1:node): node count and rank from OMPI_COMM_WORLD_*',
      {
        OMPI_COMM_WORLD_SIZE: '3',
        OMPI_COMM_WORLD_RANK: '2',
        OMPI_COMM_WORLD_LOCAL_SIZE: '1',
        PMIX_NAMESPACE: '9127',
        MASTER_ADDR: 'node01',
      },
      ['--nproc-per-node', '2'],
      { nnodes: 3, nodeRank: 2, masterAddr: 'node01', rdzvId: 'mpirun-9127' },
    ],
    [
      'a rank env without a pod is not a PyTorchJob',
      { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: 'x' },
      ['--nproc-per-node', '1'],
      { nnodes: 1, nodeRank: 0, masterAddr: undefined },
    ],
    [
      'a ddp-run inside a rank (LOCAL_RANK set) is not a PyTorchJob',
      { ...pod, RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: 'x', LOCAL_RANK: '1' },
      ['--nproc-per-node', '1'],
      { nnodes: 1 },
    ],
  ])('%s', (_what, env, flags, want) => {
    expect(parse([...flags, rankScript], env)).toMatchObject(want);
  });

  it('refuses srun with several tasks per node, and bad scheduler values naming the variable', () => {
    expect(fails(['--nproc-per-node', '1', rankScript], { ...slurm, SLURM_STEP_NUM_TASKS: '4' })).toBe(2);
    // before: mpirun -np 2 on one host started two one-node worlds, each RANK 0 of 1, and exited 0
    const twoHere = { OMPI_COMM_WORLD_SIZE: '2', OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_LOCAL_SIZE: '2' };
    expect(fails(['--nproc-per-node', '1', rankScript], twoHere)).toBe(2);
    // probe AG: a LOCAL_RANK left in the environment let it through
    expect(fails(['--nproc-per-node', '1', rankScript], { ...twoHere, LOCAL_RANK: '0' })).toBe(2);
    // inside a Slurm allocation mpirun's processes carry SLURM_* too: read as mpirun's
    expect(fails(['--nproc-per-node', '1', rankScript], { ...slurm, SLURM_STEP_NUM_TASKS: '2', ...twoHere })).toBe(2);
    const perNode = { OMPI_COMM_WORLD_SIZE: '3', OMPI_COMM_WORLD_RANK: '2', OMPI_COMM_WORLD_LOCAL_SIZE: '1' };
    expect(parse(['--nproc-per-node', '2', rankScript], { ...slurm, ...perNode })).toMatchObject({
      nnodes: 3,
      nodeRank: 2,
    });
    expect(fails([rankScript], { PET_NNODES: 'two', PET_NPROC_PER_NODE: '1' })).toBe(2);
    expect(fails([rankScript], { PET_NNODES: '1:4', PET_NPROC_PER_NODE: '1' })).toBe(2);
  });
});
