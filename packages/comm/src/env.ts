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
  /** Which variables were read: 'torchrun' | 'openmpi' | 'slurm' | 'default'. */
  source: 'torchrun' | 'openmpi' | 'slurm' | 'default';
}

export const DEFAULT_MASTER_PORT = 29500;
/** Used only when DDP_SECRET is unset (torchrun/mpirun users); anyone on the network knows it. */
export const INSECURE_DEFAULT_SECRET = 'ddp-insecure-default-secret';

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

/** Reads the launcher's variables: torchrun's, else Open MPI's, else Slurm's. */
export function readLaunchEnv(env: Env = process.env): LaunchEnv {
  const secret = env.DDP_SECRET || INSECURE_DEFAULT_SECRET;
  const masterPort = int(env, 'MASTER_PORT') ?? DEFAULT_MASTER_PORT;
  if (env.RANK !== undefined && env.WORLD_SIZE !== undefined) {
    const worldSize = int(env, 'WORLD_SIZE') ?? 1;
    return {
      rank: int(env, 'RANK') ?? 0,
      worldSize,
      localRank: int(env, 'LOCAL_RANK') ?? int(env, 'RANK') ?? 0,
      localWorldSize: int(env, 'LOCAL_WORLD_SIZE') ?? worldSize,
      masterAddr: env.MASTER_ADDR || '127.0.0.1',
      masterPort,
      secret,
      source: 'torchrun',
    };
  }
  if (env.OMPI_COMM_WORLD_RANK !== undefined && env.OMPI_COMM_WORLD_SIZE !== undefined) {
    const worldSize = int(env, 'OMPI_COMM_WORLD_SIZE') ?? 1;
    return {
      rank: int(env, 'OMPI_COMM_WORLD_RANK') ?? 0,
      worldSize,
      localRank: int(env, 'OMPI_COMM_WORLD_LOCAL_RANK') ?? 0,
      localWorldSize: int(env, 'OMPI_COMM_WORLD_LOCAL_SIZE') ?? worldSize,
      masterAddr: env.MASTER_ADDR || '127.0.0.1',
      masterPort,
      secret,
      source: 'openmpi',
    };
  }
  if (env.SLURM_PROCID !== undefined && env.SLURM_NTASKS !== undefined) {
    const worldSize = int(env, 'SLURM_NTASKS') ?? 1;
    return {
      rank: int(env, 'SLURM_PROCID') ?? 0,
      worldSize,
      localRank: int(env, 'SLURM_LOCALID') ?? 0,
      localWorldSize: Number.parseInt(env.SLURM_NTASKS_PER_NODE ?? '', 10) || worldSize,
      masterAddr: env.MASTER_ADDR || firstSlurmHost(env.SLURM_NODELIST ?? env.SLURM_JOB_NODELIST ?? '127.0.0.1'),
      masterPort,
      secret,
      source: 'slurm',
    };
  }
  return {
    rank: 0,
    worldSize: 1,
    localRank: 0,
    localWorldSize: 1,
    masterAddr: env.MASTER_ADDR || '127.0.0.1',
    masterPort,
    secret,
    source: 'default',
  };
}
