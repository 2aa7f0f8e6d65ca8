import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** One workspace package as the checks see it. */
export interface WorkspacePackage {
  /** Folder relative to the repository root, e.g. packages/comm. */
  dir: string;
  name: string;
  /** dependencies, optionalDependencies and peerDependencies: what its published code may import. */
  runtime: Set<string>;
  dev: Set<string>;
  native: boolean;
  /** Its tsconfig.build.json (what `pnpm build` compiles), or null when it has none. */
  build: { include?: string[]; files?: string[] } | null;
  /** Its TypeScript files, relative to the repository root, with their text. */
  files: { path: string; text: string }[];
}

const FOLDERS = ['packages', 'apps', 'tooling', 'tests'];

function tsFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((entry) => {
    if (entry === 'node_modules' || entry === 'dist' || entry === 'build') return [];
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return entry.endsWith('.ts') && !entry.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every workspace package under the repository root. */
export function workspacePackages(root: string): WorkspacePackage[] {
  return FOLDERS.flatMap((folder) => {
    const base = join(root, folder);
    if (!existsSync(base)) return [];
    return readdirSync(base).flatMap((entry) => {
      const manifestPath = join(base, entry, 'package.json');
      if (!existsSync(manifestPath)) return [];
      const m = JSON.parse(readFileSync(manifestPath, 'utf8')) as Record<string, Record<string, string> | string>;
      const keys = (field: string) => Object.keys((m[field] as Record<string, string> | undefined) ?? {});
      const dir = join(base, entry);
      return [
        {
          dir: relative(root, dir),
          name: m.name as string,
          runtime: new Set([...keys('dependencies'), ...keys('optionalDependencies'), ...keys('peerDependencies')]),
          dev: new Set(keys('devDependencies')),
          native: existsSync(join(dir, 'binding.gyp')),
          build: existsSync(join(dir, 'tsconfig.build.json'))
            ? JSON.parse(readFileSync(join(dir, 'tsconfig.build.json'), 'utf8'))
            : null,
          files: tsFiles(dir).map((path) => ({ path: relative(root, path), text: readFileSync(path, 'utf8') })),
        },
      ];
    });
  });
}

/** The @ddp packages a file imports (static, dynamic and side-effect imports; subpaths folded). */
export function ddpImports(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](@ddp\/[a-z0-9-]+)/g)) found.add(m[1]);
  return [...found];
}
