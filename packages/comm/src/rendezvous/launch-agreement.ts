import { InvalidArgumentError } from '../errors.js';
import type { LaunchEnv } from './env.js';

/**
 * The default backend's rank and world size: initProcessGroup's options, else the launch variables.
 * Under a launcher the two must agree: a script written for one process ({ rank: 0, worldSize: 1 })
 * under a 2-rank launcher made two worlds of one, each training alone.
 */
export function placeFromOptions(
  opts: { rank?: number; worldSize?: number },
  env: LaunchEnv,
): { rank: number; worldSize: number } {
  const rank = opts.rank ?? env.rank;
  const worldSize = opts.worldSize ?? env.worldSize;
  if (env.source !== 'default' && (rank !== env.rank || worldSize !== env.worldSize))
    throw new InvalidArgumentError(
      `rank ${env.rank}: initProcessGroup: given rank ${rank} of ${worldSize}, but the launcher started this ` +
        `process as rank ${env.rank} of ${env.worldSize} (${env.source} variables): drop rank and worldSize ` +
        '(the launch variables are read), or start the script without a launcher',
      { rank: env.rank, op: 'initProcessGroup' },
    );
  if (!(rank >= 0 && rank < worldSize))
    throw new InvalidArgumentError(`initProcessGroup: rank ${rank} is outside a world of ${worldSize}`, {
      op: 'initProcessGroup',
    });
  return { rank, worldSize };
}

/** Variables an MPI launcher (mpirun, srun, Hydra) sets in every process it starts. */
const MPI_LAUNCHED = ['OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK', 'SLURM_PROCID'];

/**
 * Before MPI_Init: ranks from a launcher that starts no MPI job (ddp-run, torchrun, a Kubeflow pod)
 * would each be an MPI world of one, training alone without an error.
 */
export function refuseNonMpiLaunch(env: LaunchEnv, vars: NodeJS.ProcessEnv = process.env): void {
  if (env.worldSize <= 1 || MPI_LAUNCHED.some((v) => vars[v] !== undefined)) return;
  throw new InvalidArgumentError(
    `rank ${env.rank}: initProcessGroup: backend 'mpi' takes its world from MPI, but this process was ` +
      `started as rank ${env.rank} of ${env.worldSize} by a launcher that starts no MPI job (${env.source} ` +
      `variables: ddp-run, torchrun): every process would be a world of one. Start it with ` +
      `mpirun -np ${env.worldSize} (or srun), or use the default backend`,
    { rank: env.rank, op: 'initProcessGroup' },
  );
}

/**
 * After MPI_Init: MPI's rank and size against the options' and the launch variables' (torch's MPI
 * backend ignores given ones with a warning; a job started with another size than the script
 * expects trained on, silently). Returns what disagrees, or null.
 */
export function worldClash(
  given: { rank?: number; worldSize?: number },
  env: LaunchEnv,
  rank: number,
  size: number,
  vars: NodeJS.ProcessEnv = process.env,
): string | null {
  const fromEnv = env.source === 'default' ? {} : { rank: env.rank, worldSize: env.worldSize };
  const raw = { rank: numberOf(vars.RANK), worldSize: numberOf(vars.WORLD_SIZE) };
  const claims: [string, { rank?: number; worldSize?: number }][] = [
    ['the options', given],
    [`the ${env.source} variables`, fromEnv],
    ['RANK / WORLD_SIZE', raw],
  ];
  const wrong = claims.flatMap(([who, c]) => [
    ...(c.worldSize !== undefined && c.worldSize !== size ? [`${who} say a world of ${c.worldSize}`] : []),
    ...(c.rank !== undefined && c.rank !== rank ? [`${who} say rank ${c.rank}`] : []),
  ]);
  return wrong.length === 0 ? null : wrong.join(', ');
}

const numberOf = (s: string | undefined) => (s === undefined || s === '' ? undefined : Number(s));
