import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { needlessAssertions, withoutAssertions } from './assertions.js';

const base = new URL('../../tsconfig/base.json', import.meta.url).pathname;

function check(text: string) {
  const dir = mkdtempSync(join(tmpdir(), 'assertions-'));
  const file = join(dir, 'a.ts');
  writeFileSync(file, text);
  const found = needlessAssertions(base, [file], dir);
  return { found: found.map((a) => a.text), fixed: withoutAssertions(text, found) };
}

describe('type assertions the compiler does not ask for', () => {
  it('flags `!` on what cannot be nullish and `as` to the primitive type it already has', () => {
    const text = [
      'export function f(xs: number[], m: Map<string, number>, s: string | undefined, o: { a: number }) {',
      '  const a = xs[0]! + (xs[1] as number) + m.get("k")! + o.a!;',
      '  return [a, s!, s as string, xs as unknown as string[]];',
      '}',
    ].join('\n');
    const { found, fixed } = check(text);
    expect(found).toEqual(['xs[0]!', 'xs[1] as number', 'o.a!']);
    expect(fixed).toContain('const a = xs[0] + (xs[1]) + m.get("k")! + o.a;');
  });

  it('leaves generics alone: a type parameter may be instantiated with undefined', () => {
    expect(check('export const first = <T>(xs: T[]) => xs[0]!;\n').found).toEqual([]);
  });
});
