import { describe, expect, it } from 'vitest';
import { breakLongLines, longLines } from './long-lines.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
/** The value of a one-expression program (the fixer must not change what a string says). */
const evaluate = (code: string): unknown => new Function(`return ${code.trim().replace(/;$/, '')}`)();

describe('lines over 120 characters', () => {
  it('lists lines over the width, not at it, and not a test title', () => {
    const at = 'x'.repeat(120);
    const over = 'y'.repeat(121);
    const title = `it('${words(30)}', () => {});`;
    expect(longLines('a.ts', [at, over, title].join('\n'))).toEqual([{ path: 'a.ts', line: 2, width: 121 }]);
  });

  it('splits a long string literal into parts that say the same, each line within the width', () => {
    for (const q of ["'", '`']) {
      const code = `f(${q}${words(40)}${q})`;
      const fixed = breakLongLines(code);
      expect(longLines('a.ts', fixed)).toEqual([]);
      const f = (s: string) => s;
      expect(new Function('f', `return ${fixed}`)(f)).toBe(words(40));
    }
  });

  it('moves the overflow into the next literal of a + chain instead of adding a short piece', () => {
    const code = `const s =\n  '${words(22)} ' +\n  'end';`;
    const fixed = breakLongLines(code);
    expect(fixed.split('\n')).toHaveLength(3);
    expect(longLines('a.ts', fixed)).toEqual([]);
    expect(evaluate(fixed.replace('const s =', ''))).toBe(`${words(22)} end`);
  });

  it('does not split what `+` would change: a literal with a property read, or a template whose only space is inside a placeholder', () => {
    const read = `const n = '${words(30)}'.length;`;
    expect(breakLongLines(read)).toBe(read);
    const template = `f(\`\${'${'x'.repeat(130)}'}\`)`;
    expect(breakLongLines(template)).toBe(template);
  });

  it('wraps // comments and one-line JSDoc (into a block); leaves indented text in comments', () => {
    const slashes = `  // ${words(30)}`;
    expect(
      breakLongLines(slashes)
        .split('\n')
        .every((l) => l.startsWith('  // ') && l.length <= 120),
    ).toBe(true);
    const doc = breakLongLines(`/** ${words(30)} */`).split('\n');
    expect(doc[0]).toBe('/**');
    expect(doc.at(-1)).toBe(' */');
    expect(doc.slice(1, -1).every((l) => l.startsWith(' * ') && l.length <= 120)).toBe(true);
    expect(
      doc
        .slice(1, -1)
        .map((l) => l.slice(3))
        .join(' '),
    ).toBe(words(30));
    const code = ` *   node ${words(30)}`;
    expect(breakLongLines(code)).toBe(code);
  });
});
