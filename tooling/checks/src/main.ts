// `pnpm check`: the repository's structural rules (rules.ts); exits 1 listing what breaks them.
// `pnpm check --fix` first removes the type assertions the compiler does not ask for and breaks long lines.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type NeedlessAssertion, needlessAssertions, withoutAssertions } from './assertions.js';
import { uncheckedBooleanOptions } from './boolean-options.js';
import { dependencyMismatches, layerViolations, oversizedFiles } from './checks.js';
import { breakLongLines, longLines, MAX_WIDTH } from './long-lines.js';
import { workspacePackages } from './scan.js';
import { testLayoutViolations } from './test-layout.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const pkgs = workspacePackages(root);
const tsFiles = pkgs.flatMap((p) => p.files.map((f) => join(root, f.path)));
const findAssertions = () => needlessAssertions(join(root, 'tooling/tsconfig/base.json'), tsFiles, root);

let assertions = findAssertions();
// nested assertions (`a[i]![j]!`) come out one layer per pass
for (let pass = 0; process.argv.includes('--fix') && assertions.length > 0 && pass < 4; pass++) {
  const byFile = new Map<string, NeedlessAssertion[]>();
  for (const a of assertions) byFile.set(a.path, [...(byFile.get(a.path) ?? []), a]);
  for (const [path, found] of byFile) {
    const file = join(root, path);
    writeFileSync(file, withoutAssertions(readFileSync(file, 'utf8'), found));
  }
  console.log(`check --fix: removed ${assertions.length} assertions in ${byFile.size} files`);
  assertions = findAssertions();
}

const widthChecked = pkgs.flatMap((p) => p.files);
if (process.argv.includes('--fix')) {
  for (const f of widthChecked) {
    const fixed = breakLongLines(f.text);
    if (fixed !== f.text) writeFileSync(join(root, f.path), fixed);
  }
}
const tooLong = widthChecked.flatMap((f) => longLines(f.path, readFileSync(join(root, f.path), 'utf8')));

const sections = [
  ['files over the size limit (split where a second concept hides)', oversizedFiles(pkgs)],
  ['dependencies that do not match the imports', dependencyMismatches(pkgs)],
  ["imports that cross DESIGN.md's layers", layerViolations(pkgs)],
  ['test helpers outside the one layout (src/test/, src/fixtures/)', testLayoutViolations(pkgs)],
  ["boolean options read without checkBooleanOptions (a config's 'false' is truthy)", uncheckedBooleanOptions(pkgs)],
  [
    `lines over ${MAX_WIDTH} characters (\`pnpm fix\` breaks comments and strings; shorten the rest)`,
    tooLong.map((l) => `${l.path}:${l.line}: ${l.width} characters`),
  ],
  [
    'type assertions the compiler does not ask for (`pnpm check --fix` removes them)',
    assertions.map((a) => `${a.path}:${a.line}: ${a.text}`),
  ],
] as const;
let failed = false;
for (const [title, problems] of sections) {
  if (problems.length === 0) continue;
  failed = true;
  console.error(`${title}:\n${problems.map((p) => `  ${p}`).join('\n')}`);
}
if (failed) process.exit(1);
console.log(
  `check: ${pkgs.length} packages, ${tsFiles.length} files: size, width, dependencies, layers, ` +
    `test layout, boolean options, assertions ok`,
);
