// The repository's structural rules, enforced by `pnpm check` (main.ts) rather than by reminders.

/** Source files longer than this are split where a second concept hides (tests are exempt). */
export const MAX_LINES = 300;

/**
 * Which @ddp packages each package's runtime code may import (DESIGN.md's layers). Native
 * addons (a binding.gyp beside the package.json) are the ground floor: anyone below may load one.
 */
export const LAYERS: Record<string, readonly string[]> = {
  half: [],
  comm: ['half'],
  tensor: ['half'],
  launch: [],
  autograd: ['tensor', 'comm'],
  nn: ['tensor', 'autograd'],
  data: ['tensor', 'autograd', 'comm'],
  join: ['tensor', 'comm', 'autograd'],
  reducer: ['tensor', 'comm', 'autograd', 'nn', 'join'],
  zero: ['tensor', 'comm', 'autograd', 'nn', 'join'],
  fsdp: ['tensor', 'comm', 'autograd', 'nn', 'join', 'zero'],
  syncbn: ['tensor', 'comm', 'autograd', 'nn', 'join'],
  tp: ['tensor', 'comm', 'autograd', 'nn'],
  pp: ['tensor', 'comm', 'autograd', 'nn'],
  contrastive: ['tensor', 'comm', 'autograd', 'nn'],
  amp: ['tensor', 'comm', 'autograd', 'join'],
  'data-parallel': ['tensor', 'autograd', 'nn'],
};

/**
 * Test and tool code: exempt from the size and layer rules (it may start worlds, read
 * fixtures). Runtime code is what sits under src/ and is no test, child script or fixture.
 */
export function isTestFile(path: string): boolean {
  return !/\/src\//.test(path) || /\.test\.ts$|\.child\.ts$|\/src\/test\/|\/src\/fixtures\//.test(path);
}

/**
 * Boolean members of *Options interfaces that are not user options, so no checkBooleanOptions call
 * names them (boolean-options.ts): `Owner.name`, each with why.
 */
export const BOOLEAN_OPTIONS_UNCHECKED: readonly string[] = [
  // comm sits below @ddp/tensor: api/arg-checks.ts checks it in its own words
  'ReduceScatterOptions.overwriteInput',
  // a store's role, set by initProcessGroup from the rank (a user's 'false' starts no server: the connect fails loudly)
  'TCPStoreOptions.isServer',
  // the mesh's and the launcher's own: set by code, or parsed from the command line as booleans
  'MeshOptions.forceTcp',
  'MeshOptions.heartbeat',
  'LaunchOptions.sourceConditions',
  'CliOptions.standalone',
  'CliOptions.sourceConditions',
  // test helpers' options, written by the tests
  'MpirunOptions.parseResults',
  'RunWorldOptions.allowFailure',
  'SpawnRanksOptions.parseResults',
  // the app's model options, parsed from its command line as booleans
  'ClipModelOptions.gradCheckpointing',
];
