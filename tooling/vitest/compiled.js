// Vitest global setup: the workspace's TypeScript compiled once into a JavaScript twin of the workspace,
// so the rank processes a test starts (@ddp/launch/testing) run plain node. Under tsx each rank paid
// ~0.8 s of CPU to start (its loader thread and a transform per module, then again in the comm thread):
// on 2 cores, a third of CI. esbuild is tsx's own compiler, so the ranks run the same code.
// The twin is kept per state of the sources (a hash) under node_modules/.cache, and named to the tests
// in DDP_TEST_COMPILED.
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync, version } from 'esbuild';

const root = fileURLToPath(new URL('../../', import.meta.url));
const cache = join(root, 'node_modules', '.cache', 'ddp-compiled');
const packageDirs = ['packages', 'apps', 'tests', 'tooling'].flatMap((top) =>
  readdirSync(join(root, top)).map((name) => join(top, name)),
);
const typeScript = (name) => name.endsWith('.ts') && !name.endsWith('.d.ts');
const javaScript = (name) => /\.[cm]?js$/.test(name);
// as the packages' tsconfig (tooling/tsconfig/base.json): what changes emitted JavaScript
const tsconfigRaw = {
  compilerOptions: { target: 'ES2022', verbatimModuleSyntax: true, useDefineForClassFields: true },
};

/** Every file under `dir`, relative to it. */
function filesUnder(dir, prefix = '') {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(dir, join(prefix, e.name)) : [join(prefix, e.name)],
  );
}

/** The twin's name: a hash of what goes into it (compiled and copied files by content, others by name). */
function stateOfSources() {
  const hash = createHash('sha256')
    .update(version)
    .update(readFileSync(fileURLToPath(import.meta.url)));
  for (const dir of packageDirs) {
    const abs = join(root, dir);
    hash.update(`${dir}\0${readdirSync(abs).join('\0')}\0${readFileSync(join(abs, 'package.json'))}`);
    if (existsSync(join(abs, 'node_modules', '@ddp')))
      hash.update(readdirSync(join(abs, 'node_modules', '@ddp')).join());
    if (!existsSync(join(abs, 'src'))) continue;
    for (const file of filesUnder(join(abs, 'src'))) {
      hash.update(`${file}\0`);
      if (typeScript(file) || javaScript(file)) hash.update(readFileSync(join(abs, 'src', file)));
    }
  }
  return hash.digest('hex').slice(0, 16);
}

/** The package's exports with each workspace (@ddp/source) target as the compiled .js, the only condition. */
function compiledManifest(manifest) {
  const exports = Object.fromEntries(
    Object.entries(manifest.exports ?? {}).map(([path, target]) => {
      const source = typeof target === 'object' ? target['@ddp/source'] : undefined;
      return [path, source ? { import: source.replace(/\.ts$/, '.js') } : target];
    }),
  );
  return JSON.stringify({ ...manifest, exports });
}

/** node_modules of a package: third-party entries linked as they are, @ddp ones to their twins. */
function linkModules(from, to, twin, twins) {
  mkdirSync(to);
  for (const name of readdirSync(from)) {
    if (name !== '@ddp') {
      symlinkSync(join(from, name), join(to, name));
      continue;
    }
    mkdirSync(join(to, name));
    for (const pkg of readdirSync(join(from, name))) {
      const dir = twins.get(`@ddp/${pkg}`);
      // relative: the twin is built under a temporary name, then renamed
      const target = dir ? relative(join(to, name), join(twin, dir)) : join(from, name, pkg);
      symlinkSync(target, join(to, name, pkg));
    }
  }
}

function build(twin) {
  const twins = new Map(
    packageDirs.map((dir) => [JSON.parse(readFileSync(join(root, dir, 'package.json'))).name, dir]),
  );
  for (const dir of packageDirs) {
    const from = join(root, dir);
    const to = join(twin, dir);
    mkdirSync(to, { recursive: true });
    for (const name of readdirSync(from)) {
      if (name === 'package.json')
        writeFileSync(join(to, name), compiledManifest(JSON.parse(readFileSync(join(from, name)))));
      else if (name === 'node_modules') linkModules(join(from, name), join(to, name), twin, twins);
      else if (name !== 'src') symlinkSync(join(from, name), join(to, name));
    }
    if (!existsSync(join(from, 'src'))) continue;
    for (const file of filesUnder(join(from, 'src'))) {
      const source = join(from, 'src', file);
      const target = join(to, 'src', file);
      mkdirSync(join(target, '..'), { recursive: true });
      if (typeScript(file)) {
        const options = { loader: 'ts', format: 'esm', sourcemap: 'inline', sourcefile: source, tsconfigRaw };
        writeFileSync(target.replace(/\.ts$/, '.js'), transformSync(readFileSync(source, 'utf8'), options).code);
      } else if (javaScript(file)) copyFileSync(source, target);
      else symlinkSync(source, target);
    }
  }
  symlinkSync(join(root, 'node_modules'), join(twin, 'node_modules'));
}

export default function setup() {
  const twin = join(cache, stateOfSources());
  if (existsSync(twin))
    utimesSync(twin, new Date(), new Date()); // in use: not pruned below
  else {
    const building = `${twin}.${process.pid}`;
    build(building);
    try {
      renameSync(building, twin);
    } catch {
      rmSync(building, { recursive: true, force: true }); // another run built the same twin first
    }
    // twins unused for a day
    for (const name of readdirSync(cache)) {
      const old = join(cache, name);
      if (old !== twin && Date.now() - statSync(old).mtimeMs > 86_400_000)
        rmSync(old, { recursive: true, force: true });
    }
  }
  process.env.DDP_TEST_COMPILED = JSON.stringify({ source: root, twin: `${twin}/` });
}
