import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { LaunchConfigError } from './errors.js';
import { RunLogs, type StdSpec } from './logs.js';
import { readSecretFile } from './secret-file.js';

/** What `launch()` and the `ddp-run` CLI accept. Names follow torchrun's flags, camelCased. */
export interface LaunchOptions {
  /** The script every rank runs (.ts runs directly through tsx; .js and .mjs work too). */
  script: string;
  /** Arguments passed to the script after its path. */
  args?: string[];
  /** Processes (ranks) started on this node. */
  nprocPerNode: number;
  /** Nodes in the world (default 1). */
  nnodes?: number;
  /** This node's index, 0 ≤ nodeRank < nnodes (default 0). */
  nodeRank?: number;
  /** Where rank 0 hosts the TCPStore (default 127.0.0.1). */
  masterAddr?: string;
  /** The TCPStore's port; when omitted on a single node a free port is picked per attempt. */
  masterPort?: number;
  /** How many times the whole world restarts after a failure (default 0). */
  maxRestarts?: number;
  /** The run's shared secret; default: DDP_SECRET from env, else a fresh random one. */
  secret?: string;
  /** A file holding the secret, readable by its owner only (instead of `secret`). */
  secretFile?: string;
  /**
   * The run's identity (torchrun's --rdzv-id), checked by the store and every peer handshake,
   * so two worlds on one port never mix; default: a fresh random id. Required with nnodes > 1.
   */
  rdzvId?: string;
  /** torchrun's --log-dir: each run writes its redirected output under `<logDir>/<runId>_<random>/`. */
  logDir?: string;
  /** Streams written to log files instead of the console: 0 none, 1 stdout, 2 stderr, 3 both, or per local rank. */
  redirects?: StdSpec;
  /** Streams written to log files and the console (same values as redirects). */
  tee?: StdSpec;
  /** Working directory of the ranks (default process.cwd()). */
  cwd?: string;
  /** Base environment of the ranks (default process.env); the launcher's variables override it. */
  env?: NodeJS.ProcessEnv;
  /** Where the ranks' prefixed stdout lines go (default process.stdout). */
  stdout?: Writable;
  /** Where the ranks' prefixed stderr lines and the launcher's messages go (default process.stderr). */
  stderr?: Writable;
  /** Time between SIGTERM and SIGKILL when ending ranks (default 5000 ms). */
  killGraceMs?: number;
  /**
   * Inside the ddp monorepo, start children with `--conditions=@ddp/source` (src/*.ts); default true, ignored when
   * installed.
   */
  sourceConditions?: boolean;
  /** Aborting ends the world: SIGTERM to every rank, then SIGKILL after the grace period. */
  signal?: AbortSignal;
  /** Called once a world's processes are started (tests use the pids). */
  onWorldStart?: (info: WorldStartInfo) => void;
}

export interface WorldStartInfo {
  restartCount: number;
  masterPort: number;
  pids: number[];
}

/** LaunchOptions checked and completed with defaults. */
export interface LaunchPlan {
  script: string;
  args: string[];
  nprocPerNode: number;
  nnodes: number;
  nodeRank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number | undefined;
  maxRestarts: number;
  secret: string;
  runId: string;
  /** The run's log directory, when logDir is given. */
  logs: RunLogs | undefined;
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdout: Writable;
  stderr: Writable;
  killGraceMs: number;
  sourceConditions: boolean;
}

function checkInt(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `an integer ≥ ${min}` : `an integer in [${min}, ${max}]`;
    throw new LaunchConfigError(`${name} must be ${range}, got ${String(value)}`);
  }
  return value;
}

/** Validates options and fills in defaults; throws LaunchConfigError naming the bad option. */
export function planLaunch(options: LaunchOptions): LaunchPlan {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const nprocPerNode = checkInt('nprocPerNode', options.nprocPerNode, 1);
  const nnodes = checkInt('nnodes', options.nnodes ?? 1, 1);
  const nodeRank = checkInt('nodeRank', options.nodeRank ?? 0, 0, nnodes - 1);
  const maxRestarts = checkInt('maxRestarts', options.maxRestarts ?? 0, 0);
  const killGraceMs = checkInt('killGraceMs', options.killGraceMs ?? 5000, 0);
  const masterPort =
    options.masterPort === undefined ? undefined : checkInt('masterPort', options.masterPort, 1, 65535);
  if (typeof options.script !== 'string' || options.script.trim() === '')
    throw new LaunchConfigError('script must name the file every rank runs, got an empty path');
  const script = resolve(cwd, options.script);
  if (!existsSync(script)) throw new LaunchConfigError(`script not found: ${script}`);
  if (!statSync(script).isFile()) throw new LaunchConfigError(`script is not a file: ${script}`);
  if (options.secret !== undefined && options.secretFile !== undefined) {
    throw new LaunchConfigError('give secret or secretFile, not both');
  }
  const fromFile = options.secretFile === undefined ? undefined : readSecretFile(options.secretFile, cwd);
  const given = options.secret ?? fromFile ?? env.DDP_SECRET;
  if (given === '') throw new LaunchConfigError('secret must not be empty');
  const { rdzvId } = options;
  if (rdzvId !== undefined && !/^[\x21-\x7e]{1,255}$/.test(rdzvId)) {
    const got = JSON.stringify(rdzvId);
    throw new LaunchConfigError(`rdzvId must be 1 to 255 printable ASCII characters without spaces, got ${got}`);
  }
  if (nnodes > 1) {
    // Every node must agree on where the store is and on the secret; no node can pick them alone.
    if (options.masterAddr === undefined) throw new LaunchConfigError('nnodes > 1 needs masterAddr (--master-addr)');
    if (masterPort === undefined) throw new LaunchConfigError('nnodes > 1 needs masterPort (--master-port)');
    if (given === undefined) {
      throw new LaunchConfigError('nnodes > 1 needs a shared secret (--secret-file or DDP_SECRET)');
    }
    if (rdzvId === undefined) throw new LaunchConfigError('nnodes > 1 needs a shared run id (--rdzv-id)');
  }
  const runId = rdzvId ?? randomBytes(16).toString('hex');
  if ((options.redirects !== undefined || options.tee !== undefined) && options.logDir === undefined) {
    throw new LaunchConfigError('redirects and tee write to files under logDir (--log-dir)');
  }
  const logs =
    options.logDir === undefined
      ? undefined
      : new RunLogs(resolve(cwd, options.logDir), runId, options.redirects, options.tee);
  return {
    script,
    args: options.args ?? [],
    nprocPerNode,
    nnodes,
    nodeRank,
    worldSize: nprocPerNode * nnodes,
    masterAddr: options.masterAddr ?? '127.0.0.1',
    masterPort,
    maxRestarts,
    secret: given ?? randomBytes(32).toString('hex'),
    runId,
    logs,
    cwd,
    env,
    stdout: options.stdout ?? process.stdout,
    stderr: options.stderr ?? process.stderr,
    killGraceMs,
    sourceConditions: options.sourceConditions ?? true,
  };
}

/**
 * This launcher's id, given to its ranks (DDP_LAUNCH_ID): the store refuses a node whose ranks come
 * from two launchers (two jobs sharing a port, run id and secret formed one world).
 */
const LAUNCH_ID = randomBytes(6).toString('hex');

/** The environment of one rank: the torchrun variables plus the run's id, secret, launcher and restart count. */
export function rankEnv(
  plan: LaunchPlan,
  localRank: number,
  masterPort: number,
  restartCount: number,
): NodeJS.ProcessEnv {
  return {
    ...plan.env,
    RANK: String(plan.nodeRank * plan.nprocPerNode + localRank),
    LOCAL_RANK: String(localRank),
    WORLD_SIZE: String(plan.worldSize),
    LOCAL_WORLD_SIZE: String(plan.nprocPerNode),
    GROUP_RANK: String(plan.nodeRank),
    DDP_LAUNCH_ID: LAUNCH_ID,
    GROUP_WORLD_SIZE: String(plan.nnodes),
    MASTER_ADDR: plan.masterAddr,
    MASTER_PORT: String(masterPort),
    DDP_SECRET: plan.secret,
    DDP_RUN_ID: plan.runId,
    TORCHELASTIC_RUN_ID: plan.runId,
    DDP_RESTART_COUNT: String(restartCount),
    TORCHELASTIC_RESTART_COUNT: String(restartCount),
    TORCHELASTIC_MAX_RESTARTS: String(plan.maxRestarts),
  };
}
