import { InvalidArgumentError } from './errors.js';

/** Where this process sits in the world, as the launcher (ddp-run/torchrun, mpirun, srun) says. */
export interface LaunchEnv {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  masterAddr: string;
  masterPort: number;
  /** The run's shared secret for HMAC handshakes (DDP_SECRET). */
  secret: string;
  /**
   * The run's identity, checked by the store and every peer handshake: DDP_RUN_ID, else
   * TORCHELASTIC_RUN_ID, else the mpirun job id or Slurm job step, else DEFAULT_RUN_ID.
   */
  runId: string;
  /** Which variables were read: 'torchrun' | 'openmpi' | 'slurm' | 'default'. */
  source: 'torchrun' | 'openmpi' | 'slurm' | 'default';
}

export const DEFAULT_MASTER_PORT = 29500;
/** Used only when DDP_SECRET is unset (torchrun/mpirun users); anyone on the network knows it. */
export const INSECURE_DEFAULT_SECRET = 'ddp-insecure-default-secret';

/** torchrun's default --rdzv-id: ranks started by hand agree on it without being told. */
export const DEFAULT_RUN_ID = 'none';
/** Run ids travel in the handshake with a one-byte length. */
export const MAX_RUN_ID_BYTES = 255;

type Env = Record<string, string | undefined>;

function int(env: Env, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name}=${v} is not a non-negative integer`);
  return n;
}

/** First host of a Slurm node list: "node[01-04,07],gpu2" → "node01". */
export function firstSlurmHost(nodeList: string): string {
  const m = /^([^,[]+)(?:\[([^\]]+)\])?/.exec(nodeList.trim());
  if (!m) return nodeList;
  const prefix = m[1] ?? '';
  if (!m[2]) return prefix;
  const first = m[2].split(',')[0] ?? '';
  return prefix + (first.split('-')[0] ?? '');
}

/** Variable names of each launcher, in the order they are tried. */
const LAUNCHERS = [
  { source: 'torchrun', rank: 'RANK', size: 'WORLD_SIZE', localRank: 'LOCAL_RANK', localSize: 'LOCAL_WORLD_SIZE' },
  { source: 'openmpi', rank: 'OMPI_COMM_WORLD_RANK', size: 'OMPI_COMM_WORLD_SIZE', localRank: 'OMPI_COMM_WORLD_LOCAL_RANK', localSize: 'OMPI_COMM_WORLD_LOCAL_SIZE' },
  { source: 'slurm', rank: 'SLURM_PROCID', size: 'SLURM_NTASKS', localRank: 'SLURM_LOCALID', localSize: 'SLURM_NTASKS_PER_NODE' },
] as const;

/** The run id a launcher gives every process of one job without being asked. */
function launcherRunId(env: Env, source: LaunchEnv['source']): string | undefined {
  if (source === 'openmpi' && env.OMPI_MCA_ess_base_jobid) return `openmpi-${env.OMPI_MCA_ess_base_jobid}`;
  if (source === 'slurm' && env.SLURM_JOB_ID) return `slurm-${env.SLURM_JOB_ID}.${env.SLURM_STEP_ID ?? 0}`;
  return undefined;
}

function runIdOf(env: Env, source: LaunchEnv['source']): string {
  const id = env.DDP_RUN_ID || env.TORCHELASTIC_RUN_ID || launcherRunId(env, source) || DEFAULT_RUN_ID;
  if (Buffer.byteLength(id) > MAX_RUN_ID_BYTES) {
    throw new InvalidArgumentError(`DDP_RUN_ID is longer than ${MAX_RUN_ID_BYTES} bytes`);
  }
  return id;
}

/** Reads the launcher's variables: torchrun's, else Open MPI's, else Slurm's. */
export function readLaunchEnv(env: Env = process.env): LaunchEnv {
  const secret = env.DDP_SECRET || INSECURE_DEFAULT_SECRET;
  const masterPort = int(env, 'MASTER_PORT') ?? DEFAULT_MASTER_PORT;
  const l = LAUNCHERS.find((x) => env[x.rank] !== undefined && env[x.size] !== undefined);
  if (!l) {
    const masterAddr = env.MASTER_ADDR || '127.0.0.1';
    const runId = runIdOf(env, 'default');
    const alone = { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1 };
    return { ...alone, masterAddr, masterPort, secret, runId, source: 'default' };
  }
  const rank = int(env, l.rank) ?? 0;
  const worldSize = int(env, l.size) ?? 1;
  const slurmHost = l.source === 'slurm' ? firstSlurmHost(env.SLURM_NODELIST ?? env.SLURM_JOB_NODELIST ?? '127.0.0.1') : '127.0.0.1';
  return {
    rank,
    worldSize,
    // torchrun without LOCAL_RANK: a single host; Slurm's per-node count may read "2(x4)"
    localRank: int(env, l.localRank) ?? (l.source === 'torchrun' ? rank : 0),
    localWorldSize: Number.parseInt(env[l.localSize] ?? '', 10) || worldSize,
    masterAddr: env.MASTER_ADDR || slurmHost,
    masterPort,
    secret,
    runId: runIdOf(env, l.source),
    source: l.source,
  };
}
