import { describe, expect, it } from 'vitest';
import { dependencyMismatches, layerViolations, oversizedFiles } from './checks.js';
import { ddpImports, type WorkspacePackage } from './scan.js';

// built at run time, so this file's own text imports no package in the checks' eyes
const at = '@ddp';

function pkg(
  name: string,
  files: Record<string, string>,
  runtime: string[] = [],
  dev: string[] = [],
): WorkspacePackage {
  const dir = `packages/${name}`;
  return {
    dir,
    name: `@ddp/${name}`,
    runtime: new Set(runtime),
    dev: new Set(dev),
    native: name === 'shm',
    build: null,
    files: Object.entries(files).map(([path, text]) => ({ path: `${dir}/${path}`, text })),
  };
}

describe('pnpm check', () => {
  it('finds static, dynamic and side-effect imports of @ddp packages, subpaths folded', () => {
    const text =
      `import { a } from '${at}/comm';\nconst m = await import('${at}/shm');\nimport ` +
      `'${at}/launch/testing';\nimport x from 'vitest';`;
    expect(ddpImports(text).sort()).toEqual(['@ddp/comm', '@ddp/launch', '@ddp/shm']);
  });

  it('flags source files over 300 lines, not tests', () => {
    const long = 'x;\n'.repeat(301);
    const found = oversizedFiles([
      pkg('comm', { 'src/a.ts': long, 'src/a.test.ts': long, 'src/b.ts': 'x;\n'.repeat(300) }),
    ]);
    expect(found).toEqual(['packages/comm/src/a.ts: 301 lines (at most 300)']);
  });

  it('flags undeclared imports, runtime imports declared for development only, and declared packages never imported', () => {
    const p = pkg(
      'join',
      { 'src/a.ts': `import '${at}/comm';\nimport '${at}/nn';`, 'src/a.test.ts': `import '${at}/launch';` },
      [`${at}/autograd`],
      [`${at}/nn`],
    );
    expect(dependencyMismatches([p])).toEqual([
      'packages/join/src/a.ts imports @ddp/comm, which packages/join/package.json does not declare',
      'packages/join/src/a.ts imports @ddp/nn at run time, but packages/join/package.json declares it only for ' +
        'development',
      'packages/join/src/a.test.ts imports @ddp/launch, which packages/join/package.json does not declare',
      'packages/join/package.json declares @ddp/autograd, which its code never imports',
    ]);
  });

  it('flags runtime imports across the layers; native addons and tests are exempt', () => {
    const comm = pkg('comm', {
      'src/a.ts': `import '${at}/shm';\nimport '${at}/tensor';`,
      'src/a.test.ts': `import '${at}/launch';`,
    });
    expect(layerViolations([comm, pkg('shm', {})])).toEqual([
      'packages/comm/src/a.ts imports @ddp/tensor: comm may import half',
    ]);
  });
});
