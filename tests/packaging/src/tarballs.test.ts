// What each tarball ships, checked file by file: what npm users get whatever they import.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join } from 'node:path';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import ts from 'typescript';
import { describe, expect, inject, it } from 'vitest';
import { type Manifest, readTarballs, repoRoot, type Tarball } from './tarballs.js';

/** Every package under packages/ that is not private: each one new included, none listed by hand. */
const FOLDERS = new Map(
  readdirSync(join(repoRoot, 'packages')).map((dir) => {
    const manifest = JSON.parse(readFileSync(join(repoRoot, 'packages', dir, 'package.json'), 'utf8')) as Manifest;
    return [manifest.name, { dir: join(repoRoot, 'packages', dir), manifest }] as const;
  }),
);
const PUBLISHED = [...FOLDERS.values()]
  .filter(({ manifest }) => manifest.private !== true)
  .map(({ manifest }) => manifest.name)
  .sort();
/** The conditions a published exports map may use: what Node and TypeScript resolve for users. */
const PUBLIC_CONDITIONS = new Set(['types', 'import', 'default']);

const tarballs = readTarballs(inject('packDir'));

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or null for builtins. */
function packageOf(specifier: string): string | null {
  if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

describe.each(PUBLISHED)('%s tarball', (name) => {
  const tarball = (): Tarball => {
    const t = tarballs.get(name);
    if (!t) throw new Error(`${name} was not packed`);
    return t;
  };

  it('is publint-clean (strict, suggestions included)', async () => {
    const bytes = readFileSync(tarball().file);
    const { messages, pkg } = await publint({
      pack: { tarball: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) },
      level: 'suggestion',
      strict: true,
    });
    expect(messages.map((m) => formatMessage(m, pkg))).toEqual([]);
  });

  it('ships its LICENSE, README and every file its exports and bin point at, under public conditions only', () => {
    const { manifest, files } = tarball();
    expect(manifest.license).toBe('MIT');
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    for (const [subpath, conditions] of Object.entries(manifest.exports ?? {})) {
      for (const [condition, target] of Object.entries(conditions)) {
        expect(PUBLIC_CONDITIONS.has(condition), `${subpath} has the condition '${condition}'`).toBe(true);
        expect(files, `exports['${subpath}'].${condition}`).toContain(target.replace(/^\.\//, ''));
      }
    }
    for (const target of Object.values(manifest.bin ?? {})) expect(files).toContain(target.replace(/^\.\//, ''));
  });

  it('ships no test code and no workspace-only dependency', () => {
    const { manifest, files } = tarball();
    expect(files.filter((f) => /\.(test|child)\.|test-|fixtures|(^|\/)test\//.test(f))).toEqual([]);
    expect(JSON.stringify(manifest)).not.toContain('workspace:');
  });

  it('imports only Node built-ins and the packages it declares', () => {
    const { manifest, files, dir } = tarball();
    const declared = new Set(
      Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies, ...manifest.peerDependencies }),
    );
    const undeclared: string[] = [];
    for (const file of files.filter((f) => /\.(js|d\.ts)$/.test(f))) {
      const { importedFiles } = ts.preProcessFile(readFileSync(join(dir, file), 'utf8'), true, true);
      for (const { fileName } of importedFiles) {
        if (fileName.startsWith('.')) continue;
        const pkg = packageOf(fileName);
        if (pkg !== null && !declared.has(pkg)) undeclared.push(`${file} imports ${fileName}`);
      }
    }
    expect(undeclared).toEqual([]);
  });

  it('ships every file its install script builds from: binding.gyp, its sources and the headers they include', () => {
    const { files, manifest } = tarball();
    const folder = FOLDERS.get(name)?.dir ?? '';
    const script = /^node (\S+)$/.exec(manifest.scripts?.install ?? '')?.[1];
    if (script) expect(files).toContain(script);
    if (!existsSync(join(folder, 'binding.gyp'))) return;
    expect(files).toContain('binding.gyp');
    const gyp = JSON.parse(readFileSync(join(folder, 'binding.gyp'), 'utf8')) as { targets: { sources: string[] }[] };
    const needed = new Set(gyp.targets.flatMap((t) => t.sources));
    for (const source of needed) {
      const text = readFileSync(join(folder, source), 'utf8');
      for (const [, header] of text.matchAll(/^#include "([^"]+)"/gm)) needed.add(join(dirname(source), header));
    }
    expect([...needed].filter((f) => !files.includes(f))).toEqual([]);
  });

  it('has source maps that carry their sources (src/ is not shipped)', () => {
    const { files, dir } = tarball();
    for (const map of files.filter((f) => f.endsWith('.js.map'))) {
      const { sources, sourcesContent } = JSON.parse(readFileSync(join(dir, map), 'utf8')) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      expect(sourcesContent?.filter((s) => typeof s === 'string').length, map).toBe(sources.length);
    }
  });
});
