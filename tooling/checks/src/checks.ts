import { isTestFile, LAYERS, MAX_LINES } from './rules.js';
import { ddpImports, type WorkspacePackage } from './scan.js';

/** Source files over MAX_LINES lines (tinygrad's sz.py, as a rule). */
export function oversizedFiles(pkgs: WorkspacePackage[]): string[] {
  return pkgs.flatMap((p) =>
    p.files.flatMap(({ path, text }) => {
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      return !isTestFile(path) && lines > MAX_LINES ? [`${path}: ${lines} lines (at most ${MAX_LINES})`] : [];
    }),
  );
}

/** Imports of @ddp packages the importing package does not declare, and declared ones it never imports. */
export function dependencyMismatches(pkgs: WorkspacePackage[]): string[] {
  const problems: string[] = [];
  for (const p of pkgs) {
    const usedAtRuntime = new Set<string>();
    for (const { path, text } of p.files) {
      for (const dep of ddpImports(text)) {
        if (dep === p.name) continue;
        if (!isTestFile(path)) usedAtRuntime.add(dep);
        if (!p.runtime.has(dep) && !p.dev.has(dep))
          problems.push(`${path} imports ${dep}, which ${p.dir}/package.json does not declare`);
        else if (!isTestFile(path) && !p.runtime.has(dep) && p.dir.startsWith('packages/')) {
          problems.push(
            `${path} imports ${dep} at run time, but ${p.dir}/package.json declares it only for development`,
          );
        }
      }
    }
    // published packages only: an app may depend on a package for its bin (ddp-run)
    if (!p.dir.startsWith('packages/')) continue;
    for (const dep of p.runtime) {
      if (dep.startsWith('@ddp/') && !usedAtRuntime.has(dep))
        problems.push(`${p.dir}/package.json declares ${dep}, which its code never imports`);
    }
  }
  return problems;
}

/** Runtime imports that cross DESIGN.md's layers. */
export function layerViolations(pkgs: WorkspacePackage[]): string[] {
  const native = new Set(pkgs.filter((p) => p.native).map((p) => p.name));
  return pkgs.flatMap((p) => {
    const short = p.name.replace('@ddp/', '');
    const allowed = LAYERS[short];
    if (!p.dir.startsWith('packages/') || allowed === undefined) return [];
    return p.files.flatMap(({ path, text }) =>
      isTestFile(path)
        ? []
        : ddpImports(text).flatMap((dep) =>
            dep === p.name || native.has(dep) || allowed.includes(dep.replace('@ddp/', ''))
              ? []
              : [`${path} imports ${dep}: ${short} may import ${allowed.join(', ') || 'no @ddp package'}`],
          ),
    );
  });
}
