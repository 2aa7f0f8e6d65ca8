// Boolean options must be checked as booleans where they are read: a config's 'false' is truthy, and
// `maximize: 'false'` stepped uphill, `bias: 'false'` kept the bias, silently (RELIABILITY.md).
import { BOOLEAN_OPTIONS_UNCHECKED, isTestFile } from './rules.js';
import type { WorkspacePackage } from './scan.js';

/** The checking calls, and which argument lists the names they check as booleans (an array, or a `const` one). */
const LIST_AT: Record<string, number> = {
  checkBooleanOptions: 2, // (where, opts, names, error)
  moduleOptions: 2, // (layer, opts, booleans, numbers)
  checkOptions: 3, // autograd's (where, opts, known, booleans)
  booleanOption: 1, // data's (where, 'name', value, fallback)
};

/** The text of the call whose '(' is at `open`, up to its matching ')'. */
function callText(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

/** A call's arguments, split at its top-level commas. */
function splitArguments(args: string): string[] {
  const out: string[] = [];
  let [depth, start] = [0, 0];
  for (let i = 0; i < args.length; i++) {
    if ('([{'.includes(args[i])) depth++;
    else if (')]}'.includes(args[i])) depth--;
    else if (args[i] === ',' && depth === 0) {
      out.push(args.slice(start, i).trim());
      start = i + 1;
    }
  }
  return [...out, args.slice(start).trim()];
}

const quoted = (s: string) => [...s.matchAll(/'(\w+)'/g)].map((m) => m[1]);

/** The names a file checks as booleans: each checking call's list, or the `const` array the call names. */
export function checkedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/\b(checkBooleanOptions|moduleOptions|checkOptions|booleanOption)\(/g)) {
    const list = splitArguments(callText(text, m.index + m[0].length - 1))[LIST_AT[m[1]]];
    if (list === undefined) continue;
    const named = /^\w+$/.test(list) ? new RegExp(`const ${list} = \\[([^\\]]*)\\]`).exec(text)?.[1] : list;
    for (const n of quoted(named ?? '')) names.add(n);
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
