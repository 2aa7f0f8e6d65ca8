// Lines over the width the formatter keeps (biome: 120) are strings and comments it does not break.
// The check lists them; `pnpm check --fix` breaks them: a comment wraps into more lines of the same
// kind, a string literal splits at a space into two joined with `+` (the formatter then indents).
import ts from 'typescript';

export const MAX_WIDTH = 120;

/** One line over MAX_WIDTH. */
export interface LongLine {
  path: string;
  line: number;
  width: number;
}

/**
 * Lines over `width`, except a test's title: the sentence a test is named by (`it('…', …)`) stays
 * whole, where a reader and vitest's output show it.
 */
export function longLines(path: string, text: string, width = MAX_WIDTH): LongLine[] {
  const lines = text.split('\n');
  if (!lines.some((l) => l.length > width)) return [];
  const titles = testTitleLines(text);
  return lines.flatMap((l, i) =>
    l.length > width && !titles.has(i + 1) ? [{ path, line: i + 1, width: l.length }] : [],
  );
}

const TEST_FUNCTIONS = new Set(['it', 'test', 'describe']);

/** Whether `node` is the title (first argument) of it/test/describe, or of a modifier such as it.skipIf(…). */
function isTestTitle(node: ts.Node): boolean {
  const call = node.parent;
  if (!ts.isCallExpression(call) || call.arguments[0] !== node) return false;
  let callee: ts.Expression = call.expression;
  while (ts.isCallExpression(callee) || ts.isPropertyAccessExpression(callee)) callee = callee.expression;
  return ts.isIdentifier(callee) && TEST_FUNCTIONS.has(callee.text);
}

/** 1-based numbers of the lines that hold a test title. */
function testTitleLines(text: string): Set<number> {
  const source = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
  const lines = new Set<number>();
  const visit = (node: ts.Node): void => {
    if ((ts.isStringLiteralLike(node) || ts.isTemplateExpression(node)) && isTestTitle(node))
      lines.add(source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1);
    node.forEachChild(visit);
  };
  visit(source);
  return lines;
}

/**
 * Where a string literal token may be cut: after a space, outside `${…}`, before `limit` (an offset in the
 * file), leaving at least a few words on each side when it can (no one-word line).
 */
function cutPoint(text: string, start: number, end: number, limit: number): number | null {
  let depth = 0;
  const cuts: number[] = [];
  for (let i = start + 1; i < Math.min(end - 1, limit); i++) {
    if (text[i] === '\\') i++;
    else if (text.startsWith('${', i)) depth++;
    else if (text[i] === '}' && depth > 0) depth--;
    else if (text[i] === ' ' && depth === 0 && i - start > 10) cuts.push(i + 1);
  }
  const roomy = cuts.filter((c) => end - c >= 20);
  return roomy.at(-1) ?? cuts.at(-1) ?? null;
}

/**
 * Whether `a + b` may stand where the literal stands with the same meaning: as an argument, a value,
 * or an operand of `+` (not `'…'.length`, an import path, a property name or a tagged template).
 */
function splitsSafely(node: ts.Node): boolean {
  const p = node.parent;
  if (isTestTitle(node)) return false;
  if (ts.isCallExpression(p) || ts.isNewExpression(p)) return p.expression !== node;
  if (ts.isPropertyAssignment(p) || ts.isVariableDeclaration(p)) return p.initializer === node;
  if (ts.isBinaryExpression(p)) return p.operatorToken.kind === ts.SyntaxKind.PlusToken;
  return (
    ts.isReturnStatement(p) ||
    ts.isThrowStatement(p) ||
    ts.isArrayLiteralExpression(p) ||
    ts.isParenthesizedExpression(p) ||
    ts.isArrowFunction(p) ||
    ts.isConditionalExpression(p) ||
    ts.isTemplateSpan(p)
  );
}

interface Crossing {
  start: number;
  end: number;
  quote: string;
  /** Where the next literal of the same `+` chain and quote starts, if any: the overflow moves into it. */
  next: number | null;
}

/** The literal that follows `node` in a `a + b + c` chain, when it is a plain literal of the same quote. */
function nextInChain(node: ts.Node, source: ts.SourceFile): number | null {
  const p = node.parent;
  if (!ts.isBinaryExpression(p) || p.operatorToken.kind !== ts.SyntaxKind.PlusToken) return null;
  const plus = (e: ts.Node) => ts.isBinaryExpression(e) && e.operatorToken.kind === ts.SyntaxKind.PlusToken;
  const right =
    p.left === node
      ? p.right
      : plus(p.parent) && (p.parent as ts.BinaryExpression).left === p
        ? (p.parent as ts.BinaryExpression).right
        : null;
  if (
    !right ||
    !(ts.isStringLiteral(right) || ts.isNoSubstitutionTemplateLiteral(right) || ts.isTemplateExpression(right))
  )
    return null;
  const quote = source.text[node.getStart(source)];
  const start = right.getStart(source);
  return source.text[start] === quote ? start : null;
}

/** The string literals (quotes or template) that cross `width`, outermost first. */
function literalsCrossing(text: string, width: number): Crossing[] {
  const source = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
  const found: Crossing[] = [];
  const visit = (node: ts.Node): void => {
    const literal =
      ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node);
    if (literal && splitsSafely(node)) {
      const start = node.getStart(source);
      const lineStart = text.lastIndexOf('\n', start) + 1;
      const lineEnd = text.indexOf('\n', start) === -1 ? text.length : text.indexOf('\n', start);
      if (lineEnd - lineStart > width && node.end <= lineEnd && node.end - lineStart > width - 20) {
        found.push({ start, end: node.end, quote: text[start], next: nextInChain(node, source) });
        return;
      }
    }
    node.forEachChild(visit);
  };
  visit(source);
  return found;
}

/**
 * Wraps a `//` comment line, or a JSDoc line (` * …`, or a one-line `/** … *\/`, which becomes a block),
 * into lines of at most `width`. Indented text inside a comment (code, tables) is left as it is.
 */
function wrapComment(line: string, width: number): string[] | null {
  const m = /^(\s*)(\/\/ |\* |\/\*\* )(\S.*?)( \*\/)?$/.exec(line);
  if (!m) return null;
  const [, indent, mark, body, close = ''] = m;
  const block = mark === '/** ';
  const prefix = mark === '// ' ? `${indent}// ` : block ? `${indent} * ` : `${indent}* `;
  const out: string[] = block ? [`${indent}/**`] : [];
  let current = block ? prefix : indent + mark;
  for (const word of body.split(' ')) {
    if (current.length + word.length > width && current.trim().length > 2) {
      out.push(current.trimEnd());
      current = prefix;
    }
    current += `${word} `;
  }
  out.push(current.trimEnd());
  if (block) out.push(`${indent} */`);
  else if (close) out[out.length - 1] += close;
  return out.length > 1 ? out : null;
}

/** The text with its long comments wrapped and its long string literals split. */
export function breakLongLines(text: string, width = MAX_WIDTH): string {
  let out = text;
  // a split literal's second half may still be too long: split again, a bounded number of times
  for (let pass = 0; pass < 8; pass++) {
    const before = out;
    // from the end, so earlier offsets stay valid
    for (const lit of literalsCrossing(out, width).reverse()) {
      const lineStart = out.lastIndexOf('\n', lit.start) + 1;
      // room for the indent the formatter gives the continuation
      const cut = cutPoint(out, lit.start, lit.end, lineStart + width - 10);
      if (cut === null) continue;
      const q = lit.quote;
      // the overflow joins the chain's next literal (one pass later, that one may overflow in turn)
      if (lit.next !== null) {
        const between = out.slice(lit.end, lit.next + 1);
        out = `${out.slice(0, cut)}${q}${between}${out.slice(cut, lit.end - 1)}${out.slice(lit.next + 1)}`;
      } else out = `${out.slice(0, cut)}${q} +\n${q}${out.slice(cut)}`;
    }
    if (out === before) break;
  }
  return out
    .split('\n')
    .flatMap((line) => (line.length > width ? (wrapComment(line, width) ?? [line]) : [line]))
    .join('\n');
}
