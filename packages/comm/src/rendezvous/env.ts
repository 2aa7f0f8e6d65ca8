import { createHash } from 'node:crypto';
import { type NetworkInterfaceInfo, networkInterfaces } from 'node:os';
import { InvalidArgumentError } from '../errors.js';

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
  /**
   * The address peers reach this rank at: DDP_BIND_ADDR, else the address of the interface
   * DDP_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) names; undefined: the one it reaches the store from.
   */
  bindAddr: string | undefined;
  /**
   * The ddp-run process that started this rank (DDP_LAUNCH_ID, a random id per invocation) and its
   * node (GROUP_RANK): the ranks of one node must come from one launcher. undefined: another launcher.
   */
  launcher: { id: string; node: number } | undefined;
  /** Which variables were read: torchrun's, a Kubeflow pod's (PET_*), Open MPI's, Slurm's, or none. */
  source: 'torchrun' | 'kubeflow' | 'openmpi' | 'slurm' | 'default';
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
  // digits only, as torch's int(): Number() read RANK=0x1, 1.0 or 1e0 as rank 1 (probe CS)
  const n = /^\s*\+?\d+\s*$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`${name}=${v} is not a non-negative integer`);
  return n;
}

/** First host of a Slurm node list: "node[01-04,07],gpu2" → "node01", "rack[2-3]-n[5-6]" → "rack2-n5". */
export function firstSlurmHost(nodeList: string): string {
  // the first host: up to the first comma outside brackets, each range replaced by its first value
  const first = /^(?:[^,[]|\[[^\]]*\])+/.exec(nodeList.trim())?.[0] ?? nodeList;
  return first.replace(/\[([^\],-]+)[^\]]*\]/g, '$1');
}

/** The IPv4 (else IPv6) address of the interface DDP_SOCKET_IFNAME / GLOO_SOCKET_IFNAME names (Gloo's rule). */
function interfaceAddress(env: Env, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>): string | undefined {
  const variable = env.DDP_SOCKET_IFNAME
    ? 'DDP_SOCKET_IFNAME'
    : env.GLOO_SOCKET_IFNAME
      ? 'GLOO_SOCKET_IFNAME'
      : undefined;
  if (variable === undefined) return undefined;
  // Gloo takes a comma-separated list (one device per name); one address is all a rank advertises
  const name = (env[variable] ?? '').split(',')[0].trim();
  const addrs = interfaces[name] ?? [];
  const addr = addrs.find((a) => a.family === 'IPv4') ?? addrs.find((a) => a.family === 'IPv6');
  if (addr === undefined) {
    const known = Object.keys(interfaces).join(', ');
    throw new InvalidArgumentError(
      `${variable}=${env[variable]}: no interface ${name} with an address (this host has ${known})`,
    );
  }
  return addr.address;
}

/**
 * Kubeflow's PET_* variables (Trainer v2, PyTorchJob ≥ 1.7) are meant for a per-node
 * launcher. A script started straight from the pod may use them only with one process per
 * node; otherwise every pod would train alone, or wait for ranks nobody starts.
 */
function kubeflowRanks(env: Env): { rank: number; worldSize: number } | undefined {
  const nnodes = int(env, 'PET_NNODES');
  if (nnodes === undefined) return undefined;
  if (env.PET_NPROC_PER_NODE !== '1') {
    throw new InvalidArgumentError(
      `PET_NPROC_PER_NODE=${env.PET_NPROC_PER_NODE} asks for a per-node launcher: start the script with ` +
        `ddp-run (it reads PET_*)`,
    );
  }
  const rank = int(env, 'PET_NODE_RANK') ?? 0;
  checkPlace(['PET_NODE_RANK', rank], ['PET_NNODES', nnodes]);
  return { rank, worldSize: nnodes };
}

/**
 * A rank must lie inside its world (RANK=4 of WORLD_SIZE=4, LOCAL_RANK=2 of LOCAL_WORLD_SIZE=2):
 * a script that shards its data or picks its device by them would otherwise go on, silently wrong.
 */
function checkPlace([rankName, rank]: [string, number], [sizeName, size]: [string, number]): void {
  if (rank < size) return;
  throw new InvalidArgumentError(`${rankName}=${rank} is outside ${sizeName}=${size} (ranks count from 0)`);
}

/**
 * Processes on this node. Slurm's counts ("2(x2)", "3,2") are read for this node (SLURM_NODEID) from
 * the step's list, else the job's, else SLURM_NTASKS_PER_NODE (the allocation's, which a smaller step
 * inherits: read first, a 2-task step of a 4-per-node job said 4). Others: a positive count (one that
 * did not read as a number was taken for the world size, silently).
 */
function localSizeOf(env: Env, l: (typeof LAUNCHERS)[number], worldSize: number): [string, number] {
  if (l.source === 'slurm') {
    const node = int(env, 'SLURM_NODEID') ?? 0;
    for (const name of ['SLURM_STEP_TASKS_PER_NODE', 'SLURM_TASKS_PER_NODE', 'SLURM_NTASKS_PER_NODE']) {
      const counts = env[name] ? slurmTaskCounts(env[name]) : undefined;
      if (counts) return [name, counts.length === 1 ? counts[0] : (counts[node] ?? worldSize)];
    }
    return [l.size, worldSize];
  }
  const size = int(env, l.localSize);
  if (size === 0) throw new InvalidArgumentError(`${l.localSize}=0: a node runs at least one process`);
  // larger than the world: not refused here, where one rank alone would raise and the others wait out their
  // timeout; the sizes are read for LOCAL_RANK's range only (a WORLD_SIZE that differs is the rendezvous's)
  return size === undefined ? [l.size, worldSize] : [l.localSize, size];
}

/** Slurm's tasks per node, expanded: "2(x3),1" → [2, 2, 2, 1]; undefined when not of that form. */
export function slurmTaskCounts(list: string): number[] | undefined {
  const counts: number[] = [];
  for (const part of list.split(',')) {
    const m = /^(\d+)(?:\(x(\d+)\))?$/.exec(part.trim());
    if (!m) return undefined;
    for (let i = 0; i < Number(m[2] ?? 1); i++) counts.push(Number(m[1]));
  }
  return counts;
}

/** Variable names of each launcher, in the order they are tried. */
const LAUNCHERS = [
  { source: 'torchrun', rank: 'RANK', size: 'WORLD_SIZE', localRank: 'LOCAL_RANK', localSize: 'LOCAL_WORLD_SIZE' },
  {
    source: 'openmpi',
    rank: 'OMPI_COMM_WORLD_RANK',
    size: 'OMPI_COMM_WORLD_SIZE',
    localRank: 'OMPI_COMM_WORLD_LOCAL_RANK',
    localSize: 'OMPI_COMM_WORLD_LOCAL_SIZE',
  },
  {
    source: 'slurm',
    rank: 'SLURM_PROCID',
    size: 'SLURM_NTASKS',
    localRank: 'SLURM_LOCALID',
    localSize: 'SLURM_NTASKS_PER_NODE',
  },
] as const;

/** The run id a launcher gives every process of one job without being asked. */
function launcherRunId(env: Env, source: LaunchEnv['source']): string | undefined {
  if (source === 'openmpi' && env.OMPI_MCA_ess_base_jobid) return `openmpi-${env.OMPI_MCA_ess_base_jobid}`;
  if (source === 'slurm' && env.SLURM_JOB_ID) return `slurm-${env.SLURM_JOB_ID}.${env.SLURM_STEP_ID ?? 0}`;
  // the same as ddp-run derives in a pod: the job's master address, unique among running jobs
  const master = env.PET_MASTER_ADDR || env.MASTER_ADDR;
  if (source === 'kubeflow' && master) return `kubeflow-${master}`;
  return undefined;
}

function runIdOf(env: Env, source: LaunchEnv['source']): string {
  const base = env.DDP_RUN_ID || env.TORCHELASTIC_RUN_ID || launcherRunId(env, source) || DEFAULT_RUN_ID;
  // each restart of ddp-run's is a run of its own: a node that restarted first joined the store
  // the previous attempt's rank 0 still held, and lost its restart when that rank exited
  const attempt = Number(env.DDP_RESTART_COUNT ?? 0);
  const suffix = Number.isSafeInteger(attempt) && attempt > 0 ? `${ATTEMPT_MARK}${attempt}` : '';
  // a base that fits but not with the suffix is hashed (the same on every rank): its restarts failed
  const fits = Buffer.byteLength(base + suffix) <= MAX_RUN_ID_BYTES || Buffer.byteLength(base) > MAX_RUN_ID_BYTES;
  const id = fits ? base + suffix : createHash('sha256').update(base).digest('hex') + suffix;
  if (Buffer.byteLength(id) > MAX_RUN_ID_BYTES) {
    throw new InvalidArgumentError(`DDP_RUN_ID is longer than ${MAX_RUN_ID_BYTES} bytes`);
  }
  return id;
}

const ATTEMPT_MARK = '#attempt-';

/** Whether run id `theirs` is an earlier attempt (restart) of the run `ours` is a later one of. */
export function isEarlierAttempt(theirs: string, ours: string): boolean {
  const split = (id: string) => {
    const at = id.lastIndexOf(ATTEMPT_MARK);
    return at < 0
      ? { base: id, attempt: 0 }
      : { base: id.slice(0, at), attempt: Number(id.slice(at + ATTEMPT_MARK.length)) };
  };
  const [t, o] = [split(theirs), split(ours)];
  return t.base === o.base && t.attempt < o.attempt;
}

/**
 * Reads the launcher's variables: torchrun's, else a Kubeflow pod's PET_*, else Open MPI's,
 * else Slurm's. `interfaces` (default: this host's) resolves DDP_SOCKET_IFNAME.
 */
export function readLaunchEnv(env: Env = process.env, interfaces = networkInterfaces()): LaunchEnv {
  const node = int(env, 'GROUP_RANK');
  const launcher = env.DDP_LAUNCH_ID && node !== undefined ? { id: env.DDP_LAUNCH_ID, node } : undefined;
  return { ...placeOf(env, interfaces), launcher };
}

/**
 * A rank variable without its world size (or the reverse), from torchrun's or Open MPI's pair,
 * is refused, as torch's env:// refuses it: read as no launcher, the process trained alone as
 * rank 0 of 1, silently. Slurm's is not: SLURM_NTASKS without SLURM_PROCID is any salloc shell.
 */
function refuseHalfSet(env: Env): void {
  for (const l of LAUNCHERS.filter((x) => x.source !== 'slurm')) {
    const [set, unset] = env[l.rank] !== undefined ? [l.rank, l.size] : [l.size, l.rank];
    if (env[set] === undefined || env[unset] !== undefined) continue;
    throw new InvalidArgumentError(
      `${set}=${env[set]} is set but ${unset} is not: a launcher sets both (ddp-run, torchrun, mpirun); ` +
        'set both, or neither for a world of one',
    );
  }
}

/**
 * RANK and WORLD_SIZE that no launcher set (ddp-run and torchrun set DDP_LAUNCH_ID or
 * TORCHELASTIC_RUN_ID beside them) and that disagree with the scheduler's own (Open MPI's, else
 * Slurm's): leftovers exported in a shell or an image were read first, and every process mpirun
 * or srun started trained as a world of its own, silently (probe AG).
 */
function refuseLeftoverTorchrun(env: Env): void {
  if (env.DDP_LAUNCH_ID || env.TORCHELASTIC_RUN_ID) return;
  const other = LAUNCHERS.find(
    (x) => x.source !== 'torchrun' && env[x.rank] !== undefined && env[x.size] !== undefined,
  );
  if (!other || (env[other.rank] === env.RANK && env[other.size] === env.WORLD_SIZE)) return;
  throw new InvalidArgumentError(
    `RANK=${env.RANK} and WORLD_SIZE=${env.WORLD_SIZE} disagree with ${other.rank}=${env[other.rank]} and ` +
      `${other.size}=${env[other.size]}, and no launcher set them (ddp-run and torchrun set DDP_LAUNCH_ID or ` +
      'TORCHELASTIC_RUN_ID): left over in the shell or the image, they would make each process a world of its ' +
      `own. Unset RANK and WORLD_SIZE (each process then reads ${other.rank}), or start the ranks with ddp-run`,
  );
}

function placeOf(env: Env, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>): Omit<LaunchEnv, 'launcher'> {
  const secret = env.DDP_SECRET || INSECURE_DEFAULT_SECRET;
  const masterPort = int(env, 'MASTER_PORT') ?? DEFAULT_MASTER_PORT;
  const bindAddr = env.DDP_BIND_ADDR || interfaceAddress(env, interfaces);
  // torchrun and ddp-run always set LOCAL_RANK; a pod's RANK without it counts pods
  const torchrun = env.LOCAL_RANK !== undefined || env.PET_NNODES === undefined;
  const l = LAUNCHERS.find(
    (x) => env[x.rank] !== undefined && env[x.size] !== undefined && (x.source !== 'torchrun' || torchrun),
  );
  const pod = l ? undefined : kubeflowRanks(env);
  if (pod) {
    const masterAddr = env.PET_MASTER_ADDR || env.MASTER_ADDR || '127.0.0.1';
    const port = int(env, 'PET_MASTER_PORT') ?? masterPort;
    const where = { localRank: 0, localWorldSize: 1, masterAddr, masterPort: port, secret, bindAddr };
    return { ...pod, ...where, runId: runIdOf(env, 'kubeflow'), source: 'kubeflow' };
  }
  if (!l) {
    refuseHalfSet(env);
    const masterAddr = env.MASTER_ADDR || '127.0.0.1';
    const runId = runIdOf(env, 'default');
    const alone = { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1 };
    return { ...alone, masterAddr, masterPort, secret, runId, bindAddr, source: 'default' };
  }
  if (l.source === 'torchrun') refuseLeftoverTorchrun(env);
  const rank = int(env, l.rank) ?? 0;
  const worldSize = int(env, l.size) ?? 1;
  // torchrun without LOCAL_RANK: a single host
  const localRank = int(env, l.localRank) ?? (l.source === 'torchrun' ? rank : 0);
  const [localSizeName, localWorldSize] = localSizeOf(env, l, worldSize);
  checkPlace([l.rank, rank], [l.size, worldSize]);
  checkPlace([l.localRank, localRank], [localSizeName, localWorldSize]); // the variable the size came from
  const nodeList = env.SLURM_STEP_NODELIST ?? env.SLURM_NODELIST ?? env.SLURM_JOB_NODELIST ?? '127.0.0.1';
  const slurmHost = l.source === 'slurm' ? firstSlurmHost(nodeList) : '127.0.0.1';
  return {
    rank,
    worldSize,
    localRank,
    localWorldSize,
    masterAddr: env.MASTER_ADDR || slurmHost,
    masterPort,
    secret,
    bindAddr,
    runId: runIdOf(env, l.source),
    source: l.source,
  };
}
