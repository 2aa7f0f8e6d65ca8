// `pnpm check`: the repository's structural rules (rules.ts); exits 1 listing what breaks them.
import { fileURLToPath } from 'node:url';
import { dependencyMismatches, layerViolations, oversizedFiles } from './checks.js';
import { workspacePackages } from './scan.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const pkgs = workspacePackages(root);
const sections = [
  ['files over the size limit (split where a second concept hides)', oversizedFiles(pkgs)],
  ['dependencies that do not match the imports', dependencyMismatches(pkgs)],
  ["imports that cross DESIGN.md's layers", layerViolations(pkgs)],
] as const;
let failed = false;
for (const [title, problems] of sections) {
  if (problems.length === 0) continue;
  failed = true;
  console.error(`${title}:\n${problems.map((p) => `  ${p}`).join('\n')}`);
}
if (failed) process.exit(1);
console.log(`check: ${pkgs.length} packages, ${pkgs.reduce((n, p) => n + p.files.length, 0)} files: size, dependencies, layers ok`);
