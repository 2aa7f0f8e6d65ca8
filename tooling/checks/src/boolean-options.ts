// Boolean options must be checked as booleans where they are read: a config's 'false' is truthy, and
// `maximize: 'false'` stepped uphill, `bias: 'false'` kept the bias, silently (RELIABILITY.md).
import { BOOLEAN_OPTIONS_UNCHECKED, isTestFile } from './rules.js';
import type { WorkspacePackage } from './scan.js';

/** Calls whose array-literal arguments (or a `const` array they name) list the options checked as booleans. */
const CHECKING_CALLS = /\b(checkBooleanOptions|booleanOption|moduleOptions|checkOptions)\(/g;

/** The text of the call whose '(' is at `open`, up to its matching ')'. */
function callText(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

const quoted = (s: string) => [...s.matchAll(/'(\w+)'/g)].map((m) => m[1]);

/** The names a file checks as booleans: in the calls' array literals, or the `const` arrays the calls name. */
export function checkedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(CHECKING_CALLS)) {
    const args = callText(text, m.index + m[0].length - 1);
    if (m[1] === 'booleanOption') {
      for (const n of quoted(args.split(',')[1] ?? '')) names.add(n); // (where, 'name', value, fallback)
      continue;
    }
    // the last array literal: checkOptions' and moduleOptions' first arrays are the known names
    const arrays = [...args.matchAll(/\[([^[\]]*)\]/g)];
    const last = arrays.at(-1);
    if (last && (m[1] === 'checkBooleanOptions' || arrays.length > (m[1] === 'checkOptions' ? 1 : 0)))
      for (const n of quoted(last[1])) names.add(n);
    const named = /,\s*(\w+),\s*[^,]+\)?\s*$/.exec(args)?.[1]; // checkBooleanOptions(where, opts, booleans, error)
    const list = named && new RegExp(`const ${named} = \\[([^\\]]*)\\]`).exec(text);
    if (m[1] === 'checkBooleanOptions' && list) for (const n of quoted(list[1])) names.add(n);
  }
  return names;
}

/** `name?: boolean` members of interfaces named *Options, with their line. */
export function declaredBooleanOptions(text: string): { name: string; owner: string; line: number }[] {
  const found: { name: string; owner: string; line: number }[] = [];
  let owner: string | null = null;
  text.split('\n').forEach((line, i) => {
    const start = /^export interface (\w+Options)\b/.exec(line) ?? /^interface (\w+Options)\b/.exec(line);
    if (start) owner = start[1];
    else if (/^}/.test(line)) owner = null;
    const member = owner && /^\s+(?:readonly )?(\w+)\??: boolean;/.exec(line);
    if (owner && member) found.push({ name: member[1], owner, line: i + 1 });
  });
  return found;
}

/** Boolean options of a package's *Options interfaces that no checking call of the package names. */
export function uncheckedBooleanOptions(pkgs: WorkspacePackage[]): string[] {
  return pkgs.flatMap((p) => {
    const runtime = p.files.filter((f) => !isTestFile(f.path));
    const checked = new Set(runtime.flatMap((f) => [...checkedNames(f.text)]));
    return runtime.flatMap((f) =>
      declaredBooleanOptions(f.text)
        .filter(({ name, owner }) => !checked.has(name) && !BOOLEAN_OPTIONS_UNCHECKED.includes(`${owner}.${name}`))
        .map(({ name, owner, line }) => `${f.path}:${line}: ${owner}.${name} is read without checkBooleanOptions`),
    );
  });
}
