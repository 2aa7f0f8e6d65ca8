import { execFileSync } from 'node:child_process';
import { LaunchConfigError } from './errors.js';

type Env = Record<string, string | undefined>;

/**
 * Flag values a scheduler gives ddp-run (the per-node launcher), as the flags' own strings:
 * they go through the same parsers as the command line, which overrides them.
 */
export interface SchedulerFlags {
  /**
   * Which scheduler was recognised: 'pet' (torchrun's PET_* variables: Kubeflow Trainer v2, PyTorchJob), 'pytorchjob',
   * 'slurm'.
   */
  source: 'pet' | 'pytorchjob' | 'slurm' | 'mpirun';
  /** Flag name (as on the command line, without `--`) → value, with the variable it came from. */
  values: Map<string, { value: string; from: string }>;
}

/** torchrun reads `PET_<FLAG>` as the default of `--<flag>`; these are the flags ddp-run shares with it. */
export const PET_FLAGS = [
  'nnodes',
  'nproc-per-node',
  'node-rank',
  'master-addr',
  'master-port',
  'max-restarts',
  'rdzv-endpoint',
  'rdzv-backend',
  'rdzv-id',
  'log-dir',
  'redirects',
  'tee',
] as const;

const petName = (flag: string): string => `PET_${flag.toUpperCase().replace(/-/g, '_')}`;

/** First host of a Slurm node list, expanded by Slurm's own `scontrol show hostnames`. */
function firstSlurmHost(nodeList: string): string {
  if (!nodeList.includes('[')) return nodeList.split(',')[0] ?? nodeList;
  try {
    return execFileSync('scontrol', ['show', 'hostnames', nodeList], { encoding: 'utf8' }).split('\n')[0].trim();
  } catch (e) {
    throw new LaunchConfigError(
      `cannot expand SLURM_JOB_NODELIST=${nodeList} (scontrol: ${(e as Error).message.split('\n')[0]}); ` +
        'give --master-addr or MASTER_ADDR',
    );
  }
}

/**
 * Slurm gives no port: one derived from the job and step ids, so every node agrees and two jobs, or two
 * steps of one job run at once (a sweep: `srun … & srun … &`; probe CS), rarely collide. Step 0 keeps
 * the job's own port.
 */
export function slurmMasterPort(jobId: string, stepId = '0'): string {
  const step = Number.parseInt(stepId, 10) || 0;
  return String(15000 + ((Number.parseInt(jobId, 10) + 1009 * step) % 10000));
}

/**
 * ddp-run inside `srun --ntasks-per-node=1 ddp-run …`: node rank, node count, master (first
 * node of the step, port from the job id) and run id (the job step) come from SLURM_*.
 */
function slurmFlags(env: Env, set: (flag: string, value: string, from: string) => void): void {
  const nodes = env.SLURM_STEP_NUM_NODES ?? env.SLURM_NNODES ?? '1';
  const tasks = env.SLURM_STEP_NUM_TASKS ?? env.SLURM_NTASKS ?? nodes;
  if (tasks !== nodes) {
    throw new LaunchConfigError(
      `srun started ${tasks} tasks on ${nodes} node(s); ddp-run starts the ranks of its node itself, ` +
        'so run one per node: srun --ntasks-per-node=1 ddp-run --nproc-per-node N …',
    );
  }
  set('nnodes', nodes, env.SLURM_STEP_NUM_NODES ? 'SLURM_STEP_NUM_NODES' : 'SLURM_NNODES');
  set('node-rank', env.SLURM_NODEID ?? '0', 'SLURM_NODEID');
  const list = env.SLURM_STEP_NODELIST ?? env.SLURM_JOB_NODELIST ?? env.SLURM_NODELIST;
  if (env.MASTER_ADDR) set('master-addr', env.MASTER_ADDR, 'MASTER_ADDR');
  else if (list) set('master-addr', firstSlurmHost(list), 'SLURM_STEP_NODELIST');
  if (env.MASTER_PORT) set('master-port', env.MASTER_PORT, 'MASTER_PORT');
  else set('master-port', slurmMasterPort(env.SLURM_JOB_ID ?? '0', env.SLURM_STEP_ID), 'SLURM_JOB_ID');
  set('rdzv-id', `slurm-${env.SLURM_JOB_ID}.${env.SLURM_STEP_ID}`, 'SLURM_JOB_ID');
}

/**
 * ddp-run started by mpirun (`mpirun --map-by ppr:1:node ddp-run …`): node count and node rank
 * from OMPI_COMM_WORLD_*; the master address is the user's (Open MPI names no host). Several per
 * node are refused: each launcher started a world of its own on a random port, and the job
 * trained N times alone and exited 0.
 */
function mpirunFlags(env: Env, set: (flag: string, value: string, from: string) => void): void {
  const size = env.OMPI_COMM_WORLD_SIZE ?? '1';
  const local = env.OMPI_COMM_WORLD_LOCAL_SIZE ?? '1';
  if (local !== '1') {
    throw new LaunchConfigError(
      `mpirun started ${local} ddp-run processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE=${local}, ` +
        `OMPI_COMM_WORLD_SIZE=${size}); ddp-run starts the ranks of its node itself, so run one per node ` +
        '(mpirun --map-by ppr:1:node ddp-run --nproc-per-node N --master-addr <first node> …), or let mpirun ' +
        'start the ranks without ddp-run (each reads OMPI_COMM_WORLD_*)',
    );
  }
  set('nnodes', size, 'OMPI_COMM_WORLD_SIZE');
  set('node-rank', env.OMPI_COMM_WORLD_RANK ?? '0', 'OMPI_COMM_WORLD_RANK');
  if (env.MASTER_ADDR) set('master-addr', env.MASTER_ADDR, 'MASTER_ADDR');
  if (env.MASTER_PORT) set('master-port', env.MASTER_PORT, 'MASTER_PORT');
  if (env.PMIX_NAMESPACE) set('rdzv-id', `mpirun-${env.PMIX_NAMESPACE}`, 'PMIX_NAMESPACE');
}

/**
 * The flag values the scheduler around ddp-run implies, or undefined when none is recognised:
 * - torchrun's PET_* variables (Kubeflow Trainer v2 sets PET_NNODES, PET_NPROC_PER_NODE,
 *   PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT; PyTorchJob ≥ 1.7 some of them);
 * - a Kubeflow PyTorchJob pod (MASTER_ADDR, MASTER_PORT, WORLD_SIZE = pods, RANK = pod index);
 * - a Slurm job step (srun);
 * - Open MPI's mpirun (OMPI_COMM_WORLD_*), one ddp-run per node.
 * The run id is the job's: the Slurm job step, else the Kubernetes job's master address
 * (`<job>-master-0`, `<trainjob>-node-0-0.<trainjob>`), unique among running jobs.
 */
export function schedulerFlags(env: Env): SchedulerFlags | undefined {
  const values = new Map<string, { value: string; from: string }>();
  const set = (flag: string, value: string, from: string): void => {
    values.set(flag, { value, from });
  };
  let source: SchedulerFlags['source'] | undefined;
  const inPod = env.KUBERNETES_SERVICE_HOST !== undefined;
  // mpirun first: inside a Slurm allocation its processes carry the SLURM_* of orted's step too
  // whatever LOCAL_RANK says: one left over in the environment let two launchers per node start two worlds
  if (env.OMPI_COMM_WORLD_SIZE !== undefined) {
    source = 'mpirun';
    mpirunFlags(env, set);
  } else if (env.SLURM_JOB_ID && env.SLURM_STEP_ID !== undefined && env.SLURM_NODEID !== undefined) {
    source = 'slurm';
    slurmFlags(env, set);
  } else if (inPod && env.MASTER_ADDR && env.RANK !== undefined && env.WORLD_SIZE && env.LOCAL_RANK === undefined) {
    // PyTorchJob: one pod per node; its RANK and WORLD_SIZE count pods (torchrun --nnodes $WORLD_SIZE --node_rank
    // $RANK)
    source = 'pytorchjob';
    set('nnodes', env.PET_NNODES ? env.PET_NNODES : env.WORLD_SIZE, env.PET_NNODES ? 'PET_NNODES' : 'WORLD_SIZE');
    set('node-rank', env.RANK, 'RANK');
    set('master-addr', env.MASTER_ADDR, 'MASTER_ADDR');
    if (env.MASTER_PORT) set('master-port', env.MASTER_PORT, 'MASTER_PORT');
    set('rdzv-id', `kubeflow-${env.MASTER_ADDR}`, 'MASTER_ADDR');
  }
  for (const flag of PET_FLAGS) {
    const name = petName(flag);
    const value = env[name];
    if (value === undefined || value === '') continue;
    source ??= 'pet';
    set(flag, value, name);
  }
  if (source === 'pet' && !values.has('rdzv-id') && env.PET_MASTER_ADDR) {
    set('rdzv-id', `kubeflow-${env.PET_MASTER_ADDR}`, 'PET_MASTER_ADDR');
  }
  return source === undefined ? undefined : { source, values };
}
