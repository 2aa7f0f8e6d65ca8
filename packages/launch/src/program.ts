import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { LaunchConfigError } from './errors.js';
import { launch } from './launch.js';
import { parseStd, type StdSpec } from './logs.js';
import type { LaunchOptions } from './options.js';
import { schedulerFlags } from './scheduler.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

/** Exit code for a command line that cannot run (bad flag, missing script). */
export const USAGE_EXIT_CODE = 2;

/** A secret given as a flag sits in /proc/<pid>/cmdline, which every local user can read. */
const SECRET_FLAG_WARNING =
  'ddp-run: warning: --secret shows the secret to every user of this machine (ps); use --secret-file or DDP_SECRET';

function integer(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('not a non-negative integer.');
  return Number(value);
}

/** `--nproc-per-node auto|cpu`: one rank per core this process may run on (no GPUs here). */
function procsPerNode(value: string): number {
  if (value === 'auto' || value === 'cpu') return availableParallelism();
  if (value === 'gpu') throw new InvalidArgumentError('ddp-run runs on CPUs: use a number, auto or cpu.');
  return integer(value);
}

/** torchrun's `--nnodes N` or `MIN:MAX`; an elastic range (MIN < MAX) is refused. */
function nodeCount(value: string): number {
  const m = /^(\d+)(?::(\d+))?$/.exec(value);
  if (!m) throw new InvalidArgumentError('not a node count (N or MIN:MAX).');
  if (m[2] !== undefined && m[2] !== m[1]) {
    throw new InvalidArgumentError(
      `elastic ranges (${value}) are not supported: the world has a fixed size; give one number (--nnodes ${m[2]}).`,
    );
  }
  return Number(m[1]);
}

/** torchrun's `--rdzv-endpoint host[:port]` (port 29400 when omitted, as torchrun's c10d); IPv6 as [addr]:port. */
function endpoint(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(value);
  const port = m?.[3] === undefined ? 29400 : Number(m[3]);
  if (!m || port < 1 || port > 65535) throw new InvalidArgumentError('not host:port.');
  return { host: m[1] ?? m[2], port };
}

function stdSpec(value: string): StdSpec {
  try {
    return parseStd(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
}

function buildProgram(): Command {
  return new Command('ddp-run')
    .version(version)
    .description('Start one process per rank with the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, …).')
    .addOption(
      new Option('--nproc-per-node <n>', 'ranks started on this node: a number, or auto/cpu (one per core)')
        .argParser(procsPerNode)
        .makeOptionMandatory(),
    )
    .addOption(new Option('--nnodes <m>', 'nodes in the world (N, or N:N)').argParser(nodeCount).default(1))
    .addOption(new Option('--node-rank <k>', "this node's index").argParser(integer).default(0))
    .option('--master-addr <addr>', 'address of the TCPStore host, rank 0 (default: 127.0.0.1, single node only)')
    .addOption(
      new Option('--master-port <port>', 'TCPStore port (default: a free port, single node only)').argParser(integer),
    )
    .addOption(
      new Option('--max-restarts <r>', 'restart the whole world up to r times after a failure')
        .argParser(integer)
        .default(0),
    )
    .option('--secret-file <path>', "a file holding the run's shared secret, readable by its owner only (chmod 600)")
    .option('--secret <s>', 'the secret itself: every user of this machine sees it in ps')
    .option('--rdzv-id <id>', "the run's id, the same on every node (default: random; needed with --nnodes > 1)")
    .addOption(
      new Option('--rdzv-endpoint <host:port>', "rank 0's TCPStore, as --master-addr/--master-port").argParser(
        endpoint,
      ),
    )
    .addOption(
      new Option(
        '--rdzv-backend <name>',
        'rendezvous backend: c10d or static (both: a TCPStore at the endpoint)',
      ).choices(['c10d', 'static']),
    )
    .option('--log-dir <dir>', "where --redirects/--tee write each rank's stdout.log and stderr.log")
    .addOption(
      new Option(
        '-r, --redirects <std>',
        'to log files only: 0 none, 1 stdout, 2 stderr, 3 both; or 0:3,1:0 per local rank',
      ).argParser(stdSpec),
    )
    .addOption(new Option('-t, --tee <std>', 'to log files and the console (values as --redirects)').argParser(stdSpec))
    .option('--standalone', 'single node, a free local port and a random run id (torchrun --standalone)')
    .addOption(
      new Option('--kill-grace-ms <ms>', 'wait between SIGTERM and SIGKILL when ending ranks')
        .argParser(integer)
        .default(5000),
    )
    .option('--no-source-conditions', 'inside the ddp monorepo, run the ranks on dist/ instead of src/')
    .argument('<script>', 'the script each rank runs (.ts or .js)')
    .argument('[args...]', 'arguments for the script')
    .passThroughOptions()
    .exitOverride()
    .showHelpAfterError('(run ddp-run --help for usage)');
}

interface CliOptions {
  nprocPerNode: number;
  nnodes: number;
  rdzvEndpoint?: { host: string; port: number };
  rdzvBackend?: string;
  standalone?: boolean;
  logDir?: string;
  redirects?: StdSpec;
  tee?: StdSpec;
  nodeRank: number;
  masterAddr?: string;
  masterPort?: number;
  maxRestarts: number;
  secret?: string;
  secretFile?: string;
  rdzvId?: string;
  killGraceMs: number;
  sourceConditions: boolean;
}

/**
 * torchrun spells its flags with underscores too (`--nproc_per_node=2`): ddp-run's own flags,
 * up to the script, are rewritten to dashes; the script's arguments are left alone.
 */
export function dashFlags(program: Command, args: string[]): string[] {
  const out = [...args];
  for (let i = 0; i < out.length; i++) {
    const arg = out[i];
    if (arg === '--' || !arg.startsWith('-')) break;
    const eq = arg.indexOf('=');
    const name = (eq < 0 ? arg : arg.slice(0, eq)).replace(/_/g, '-');
    out[i] = eq < 0 ? name : name + arg.slice(eq);
    const option = program.options.find((o) => o.long === name || o.short === name);
    if (option && (option.required || option.optional) && eq < 0) i++;
  }
  return out;
}

/** What the command line asks for: launch options, or an exit code when it cannot run. */
export type ParsedCommandLine = { options: LaunchOptions; notes: string[] } | { exitCode: number };

/**
 * Parses ddp-run's command line (user arguments, no node/script prefix). A scheduler's
 * variables (schedulerFlags) fill in the flags not given; the command line wins.
 */
export function parseCommandLine(args: string[], env: Record<string, string | undefined>): ParsedCommandLine {
  const program = buildProgram();
  const notes: string[] = [];
  try {
    const scheduler = schedulerFlags(env);
    for (const [flag, { value, from }] of scheduler?.values ?? []) {
      const option = program.options.find((o) => o.long === `--${flag}`)!;
      try {
        const parsed = option.parseArg ? option.parseArg(value, undefined) : value;
        program.setOptionValueWithSource(option.attributeName(), parsed, 'env');
      } catch (e) {
        throw new LaunchConfigError(`${from}=${value} (for --${flag}): ${(e as Error).message}`);
      }
    }
    if (scheduler) {
      const given = [...scheduler.values].map(([flag, { value, from }]) => `--${flag} ${value} (${from})`);
      notes.push(`from ${scheduler.source}: ${given.join(', ')}`);
    }
  } catch (error) {
    if (!(error instanceof LaunchConfigError)) throw error;
    process.stderr.write(`ddp-run: ${error.message}\n`);
    return { exitCode: USAGE_EXIT_CODE };
  }
  try {
    program.parse(dashFlags(program, args), { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) return { exitCode: error.exitCode === 0 ? 0 : USAGE_EXIT_CODE };
    throw error;
  }
  const opts = program.opts<CliOptions>();
  const [script, scriptArgs] = program.processedArgs as [string, string[]];
  // torchrun's c10d rendezvous hands out node ranks; ddp-run's does not: every node took 0 and the first waited
  // out its timeout for ranks that never came (probe CS)
  if (opts.rdzvBackend === 'c10d' && opts.nnodes > 1 && program.getOptionValueSource('nodeRank') === 'default') {
    process.stderr.write(
      `ddp-run: --rdzv-backend c10d with --nnodes ${opts.nnodes} needs --node-rank on each node ` +
        `(0 … ${opts.nnodes - 1}): ` +
        "ddp-run's rendezvous does not assign node ranks (under Slurm, mpirun or a PyTorchJob it reads them)\n",
    );
    return { exitCode: USAGE_EXIT_CODE };
  }
  let { masterAddr, masterPort, nnodes, rdzvId } = opts;
  if (opts.rdzvEndpoint) {
    const { host, port } = opts.rdzvEndpoint;
    const cli = (key: string) => program.getOptionValueSource(key) === 'cli';
    if ((cli('masterAddr') && masterAddr !== host) || (cli('masterPort') && masterPort !== port)) {
      process.stderr.write(`ddp-run: --rdzv-endpoint ${host}:${port} and --master-addr/--master-port disagree\n`);
      return { exitCode: USAGE_EXIT_CODE };
    }
    masterAddr = host;
    masterPort = port;
  }
  if (opts.standalone) {
    if (nnodes !== 1) {
      process.stderr.write(`ddp-run: --standalone runs a single node, got --nnodes ${nnodes}\n`);
      return { exitCode: USAGE_EXIT_CODE };
    }
    // torchrun --standalone: a local store on a free port, a fresh run id
    masterAddr = '127.0.0.1';
    masterPort = undefined;
    rdzvId = undefined;
    nnodes = 1;
  }
  const options: LaunchOptions = {
    script,
    args: scriptArgs,
    nprocPerNode: opts.nprocPerNode,
    nnodes,
    nodeRank: opts.standalone ? 0 : opts.nodeRank,
    masterAddr,
    masterPort,
    maxRestarts: opts.maxRestarts,
    secret: opts.secret,
    secretFile: opts.secretFile,
    rdzvId,
    logDir: opts.logDir,
    redirects: opts.redirects,
    tee: opts.tee,
    killGraceMs: opts.killGraceMs,
    sourceConditions: opts.sourceConditions,
  };
  return { options, notes };
}

/** Runs ddp-run on `argv` (node-style: [node, script, ...flags]) and returns its exit code. */
export async function main(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv.slice(2), process.env);
  if ('exitCode' in parsed) return parsed.exitCode;
  const { options, notes } = parsed;
  for (const note of notes) process.stderr.write(`[ddp-run] ${note}\n`);
  if (options.secret !== undefined) process.stderr.write(`${SECRET_FLAG_WARNING}\n`);
  // a terminal gone (ssh lost: EIO) or a closed pipe (EPIPE): the ranks' output has nowhere to go, and the
  // unhandled write error killed ddp-run while its ranks ran their SIGHUP handlers (review)
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  try {
    const result = await launch(options, { forwardSignals: true });
    return result.exitCode;
  } catch (error) {
    if (!(error instanceof LaunchConfigError)) throw error;
    process.stderr.write(`ddp-run: ${error.message}\n`);
    return USAGE_EXIT_CODE;
  }
}
