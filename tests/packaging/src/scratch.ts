// A user's project outside the monorepo: a fresh directory where npm installs only tarballs
// (and third-party packages from the registry), and programs run with the installed ddp-run.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Manifest, repoRoot, run, type Tarball } from './tarballs.js';

/** The first ```ts block of a README of this repository: examples there must run as they are. */
export function readmeExample(readme: string): string {
  const text = readFileSync(join(repoRoot, readme), 'utf8');
  const block = /^```ts\n([\s\S]*?)^```$/m.exec(text);
  if (!block) throw new Error(`${readme} has no ts code block`);
  return block[1];
}

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

export class ScratchProject {
  readonly dir = mkdtempSync(join(tmpdir(), 'ddp-packaging-'));

  /**
   * npm installs the tarballs and `thirdParty` specs. Each @ddp name is pinned to its tarball
   * (overrides, so npm asks no registry about it) and other @ddp names go to an unreachable
   * registry: a dependency missing from the tarballs fails the install at once instead of
   * fetching whatever the public registry has under that name.
   */
  constructor(
    readonly packages: Tarball[],
    thirdParty: string[],
  ) {
    const tarballs = Object.fromEntries(packages.map((p) => [p.manifest.name, `file:${p.file}`]));
    const manifest = { name: 'scratch', private: true, type: 'module', dependencies: tarballs, overrides: tarballs };
    writeFileSync(join(this.dir, 'package.json'), JSON.stringify(manifest, null, 2));
    const flags = [
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--fetch-retries=0',
      '--@ddp:registry=http://127.0.0.1:9/',
    ];
    run('npm', ['install', ...flags, ...thirdParty], { cwd: this.dir, timeoutMs: 240_000 });
  }

  write(file: string, source: string): this {
    writeFileSync(join(this.dir, file), source);
    return this;
  }

  installed(name: string): Manifest {
    return JSON.parse(readFileSync(join(this.dir, 'node_modules', name, 'package.json'), 'utf8')) as Manifest;
  }

  /** `npx ddp-run --nproc-per-node <n> <script>` with the installed launcher. */
  ddpRun(script: string, nprocs: number): { code: number | null; stdout: string; stderr: string } {
    const bin = join(this.dir, 'node_modules', '.bin', 'ddp-run');
    const r = run(bin, ['--nproc-per-node', String(nprocs), '--kill-grace-ms', '2000', script], {
      cwd: this.dir,
      timeoutMs: 90_000,
      allowFailure: true,
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /**
   * `tsc` on `files` as a strict user project would check them: NodeNext, no skipLibCheck, and
   * the installed packages' optional dependencies removed (an install may lack them).
   */
  typecheck(files: string[]): string {
    for (const { manifest } of this.packages) {
      for (const optional of Object.keys(manifest.optionalDependencies ?? {})) {
        rmSync(join(this.dir, 'node_modules', optional), { recursive: true, force: true });
      }
    }
    const compilerOptions = { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false };
    writeFileSync(join(this.dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
    const r = run(process.execPath, [tsc, '-p', this.dir], { cwd: this.dir, timeoutMs: 120_000, allowFailure: true });
    return `${r.stdout}${r.stderr}`.trim();
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
