// The published packages as npm would get them: `pnpm build`, then `pnpm pack` of every package
// under packages/ into a temporary directory, each tarball also unpacked for reading.
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

export interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  exports?: Record<string, Record<string, string>>;
  bin?: Record<string, string>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface Tarball {
  /** Path of the .tgz. */
  file: string;
  /** Where it was unpacked (the tarball's `package/` directory). */
  dir: string;
  /** The package.json that would be published. */
  manifest: Manifest;
  /** Every file in the tarball, relative to the package root. */
  files: string[];
}

/**
 * A user's environment: this one's less what pnpm and vitest set for their own runs. NODE_PATH
 * (set by pnpm) and PATH's node_modules/.bin entries would let a program resolve the monorepo's
 * packages instead of its own.
 */
export function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  const runnerVariables =
    /^(npm_|pnpm_|VITEST|(NODE_OPTIONS|NODE_PATH|NODE_ENV|TEST|MODE|PROD|DEV|BASE_URL|SSR|FORCE_TTY)$)/i;
  for (const key of Object.keys(env)) if (runnerVariables.test(key)) delete env[key];
  env.PATH = (env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => !dir.includes('node_modules'))
    .join(delimiter);
  return env;
}

/** Runs a command to its end (or `timeoutMs`, then SIGTERM); throws with its output unless `allowFailure`. */
export function run(
  command: string,
  args: string[],
  opts: { cwd: string; timeoutMs: number; allowFailure?: boolean },
): SpawnSyncReturns<string> {
  const r = spawnSync(command, args, {
    cwd: opts.cwd,
    env: childEnv(),
    encoding: 'utf8',
    timeout: opts.timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error && !opts.allowFailure) throw new Error(`${command} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0 && !opts.allowFailure) {
    throw new Error(`${command} ${args.join(' ')} exited ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`);
  }
  return r;
}

/** Builds (turbo's cache makes an up-to-date build cheap), packs every package into `dest` and unpacks each. */
export function packAll(dest: string): void {
  run('pnpm', ['build'], { cwd: repoRoot, timeoutMs: 300_000 });
  run('pnpm', ['-r', '--filter', './packages/*', 'pack', '--pack-destination', dest], {
    cwd: repoRoot,
    timeoutMs: 120_000,
  });
  for (const name of readdirSync(dest).filter((f) => f.endsWith('.tgz'))) {
    const unpacked = join(dest, name.replace(/\.tgz$/, ''));
    mkdirSync(unpacked);
    run('tar', ['-xzf', join(dest, name), '-C', unpacked], { cwd: dest, timeoutMs: 60_000 });
  }
}

/** The tarballs packAll left in `dest`, by package name. */
export function readTarballs(dest: string): Map<string, Tarball> {
  const tarballs = new Map<string, Tarball>();
  for (const name of readdirSync(dest).filter((f) => f.endsWith('.tgz'))) {
    const file = join(dest, name);
    const dir = join(dest, name.replace(/\.tgz$/, ''), 'package');
    const listing = run('tar', ['-tzf', file], { cwd: dest, timeoutMs: 60_000 }).stdout;
    const files = listing
      .split('\n')
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ''));
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
    tarballs.set(manifest.name, { file, dir, manifest, files });
  }
  return tarballs;
}

/** The packages a user installs to get `roots`: the roots and their @ddp dependencies, transitively. */
export function closure(tarballs: Map<string, Tarball>, roots: string[]): Tarball[] {
  const needed = new Map<string, Tarball>();
  const visit = (name: string): void => {
    if (needed.has(name)) return;
    const tarball = tarballs.get(name);
    if (!tarball) throw new Error(`${name} is not one of the packed packages`);
    needed.set(name, tarball);
    const { dependencies = {}, optionalDependencies = {} } = tarball.manifest;
    for (const dep of Object.keys({ ...dependencies, ...optionalDependencies })) {
      if (dep.startsWith('@ddp/')) visit(dep);
    }
  };
  for (const root of roots) visit(root);
  return [...needed.values()];
}
