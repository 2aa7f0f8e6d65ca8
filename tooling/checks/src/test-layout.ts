// One layout for what tests use, in every published package: helpers and child scripts in src/test/,
// reference data in src/fixtures/; builds compile only what the entry points import, so neither reaches dist/.
import { isTestFile } from './rules.js';
import type { WorkspacePackage } from './scan.js';

/** File names that say "test helper" wherever they sit. */
const HELPER_NAME = /(^|\/)(test-[^/]*|[^/]*-fixtures?|fixtures?|test-utils?)\.ts$|\.child\.ts$/;

/** Where a published package keeps test helpers elsewhere, or lets one reach its build. */
export function testLayoutViolations(pkgs: WorkspacePackage[]): string[] {
  return pkgs
    .filter((p) => p.dir.startsWith('packages/'))
    .flatMap((p) => {
      const problems: string[] = [];
      const include = p.build?.include;
      if (p.build && !(Array.isArray(include) && include.length === 0))
        problems.push(`${p.dir}/tsconfig.build.json: "include" must be [] (build only what the entry points import)`);
      for (const { path, text } of p.files) {
        const inHelperDir = /\/src\/(test|fixtures)\//.test(path);
        if (path.startsWith(`${p.dir}/test/`)) problems.push(`${path}: test helpers go in src/test/, not test/`);
        else if (HELPER_NAME.test(path) && !inHelperDir) problems.push(`${path}: a test helper outside src/test/`);
        if (isTestFile(path)) continue;
        if (/from\s+['"]vitest['"]/.test(text)) problems.push(`${path}: runtime code imports vitest`);
        if (/from\s+['"]\.{1,2}\/(?:[^'"]*\/)?(test|fixtures)\//.test(text))
          problems.push(`${path}: runtime code imports a test helper (src/test/ or src/fixtures/), so it would ship`);
      }
      return problems;
    });
}
