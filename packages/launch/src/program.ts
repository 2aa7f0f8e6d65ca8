import { createRequire } from 'node:module';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { LaunchConfigError } from './errors.js';
import { launch } from './launch.js';

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

function buildProgram(): Command {
  return new Command('ddp-run')
    .version(version)
    .description('Start one process per rank with the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, …).')
    .addOption(new Option('--nproc-per-node <n>', 'ranks started on this node').argParser(integer).makeOptionMandatory())
    .addOption(new Option('--nnodes <m>', 'nodes in the world').argParser(integer).default(1))
    .addOption(new Option('--node-rank <k>', "this node's index").argParser(integer).default(0))
    .option('--master-addr <addr>', 'address of the TCPStore host, rank 0 (default: 127.0.0.1, single node only)')
    .addOption(new Option('--master-port <port>', 'TCPStore port (default: a free port, single node only)').argParser(integer))
    .addOption(new Option('--max-restarts <r>', 'restart the whole world up to r times after a failure').argParser(integer).default(0))
    .option('--secret-file <path>', "a file holding the run's shared secret, readable by its owner only (chmod 600)")
    .option('--secret <s>', 'the secret itself: every user of this machine sees it in ps')
    .option('--rdzv-id <id>', "the run's id, the same on every node (default: random; needed with --nnodes > 1)")
    .addOption(new Option('--kill-grace-ms <ms>', 'wait between SIGTERM and SIGKILL when ending ranks').argParser(integer).default(5000))
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

/** Runs ddp-run on `argv` (node-style: [node, script, ...flags]) and returns its exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    program.parse(argv);
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : USAGE_EXIT_CODE;
    throw error;
  }
  const opts = program.opts<CliOptions>();
  const [script, args] = program.processedArgs as [string, string[]];
  if (opts.secret !== undefined) process.stderr.write(`${SECRET_FLAG_WARNING}\n`);
  try {
    const result = await launch(
      {
        script,
        args,
        nprocPerNode: opts.nprocPerNode,
        nnodes: opts.nnodes,
        nodeRank: opts.nodeRank,
        masterAddr: opts.masterAddr,
        masterPort: opts.masterPort,
        maxRestarts: opts.maxRestarts,
        secret: opts.secret,
        secretFile: opts.secretFile,
        rdzvId: opts.rdzvId,
        killGraceMs: opts.killGraceMs,
        sourceConditions: opts.sourceConditions,
      },
      { forwardSignals: true },
    );
    return result.exitCode;
  } catch (error) {
    if (!(error instanceof LaunchConfigError)) throw error;
    process.stderr.write(`ddp-run: ${error.message}\n`);
    return USAGE_EXIT_CODE;
  }
}
