import { describe, expect, it } from 'vitest';
import type { WorkspacePackage } from './scan.js';
import { testLayoutViolations } from './test-layout.js';

function pkg(files: Record<string, string>, include: string[] | undefined = []): WorkspacePackage {
  const dir = 'packages/autograd';
  return {
    dir,
    name: '@ddp/autograd',
    runtime: new Set(),
    dev: new Set(),
    native: false,
    build: { include, files: ['src/index.ts'] },
    files: Object.entries(files).map(([path, text]) => ({ path: `${dir}/${path}`, text })),
  };
}

describe('test layout', () => {
  it('accepts helpers and child scripts in src/test/, data in src/fixtures/', () => {
    const ok = pkg({
      'src/index.ts': "export * from './tensor.js';",
      'src/a.test.ts': "import { expect } from 'vitest';\nimport { h } from './test/helpers.js';",
      'src/test/helpers.ts': "import { expect } from 'vitest';",
      'src/test/rank.child.ts': '',
      'src/fixtures/golden.ts': '',
    });
    expect(testLayoutViolations([ok])).toEqual([]);
  });

  it('flags the other layouts: test/, src/test-*.ts, a child script or fixture beside the code', () => {
    const found = testLayoutViolations([
      pkg({ 'test/helpers.ts': '', 'src/test-utils.ts': '', 'src/run.child.ts': '', 'src/fixtures.ts': '' }),
    ]);
    expect(found).toEqual([
      'packages/autograd/test/helpers.ts: test helpers go in src/test/, not test/',
      'packages/autograd/src/test-utils.ts: a test helper outside src/test/',
      'packages/autograd/src/run.child.ts: a test helper outside src/test/',
      'packages/autograd/src/fixtures.ts: a test helper outside src/test/',
    ]);
  });

  it('flags runtime code that would ship test code: vitest, or an import from src/test/ or src/fixtures/', () => {
    const found = testLayoutViolations([
      pkg({
        'src/a.ts': "import { expect } from 'vitest';",
        'src/b.ts': "import { golden } from './fixtures/golden.js';",
        'src/ops/c.ts': "import { h } from '../test/helpers.js';",
      }),
    ]);
    expect(found).toEqual([
      'packages/autograd/src/a.ts: runtime code imports vitest',
      'packages/autograd/src/b.ts: runtime code imports a test helper (src/test/ or src/fixtures/), so it would ship',
      'packages/autograd/src/ops/c.ts: runtime code imports a test helper (src/test/ or ' +
        'src/fixtures/), so it would ship',
    ]);
  });

  it('flags a build that compiles more than what the entry points import', () => {
    expect(testLayoutViolations([pkg({}, ['src'])])).toEqual([
      'packages/autograd/tsconfig.build.json: "include" must be [] (build only what the entry points import)',
    ]);
  });
});
