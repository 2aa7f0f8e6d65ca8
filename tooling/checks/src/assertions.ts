// Type assertions the compiler does not ask for: `x!` where x cannot be null or undefined, and
// `x as T` where x already has the primitive type T. They say nothing a reader can trust, so the check
// rejects them and `pnpm check --fix` removes them (TypeScript's own checker decides).
import { dirname, relative } from 'node:path';
import ts from 'typescript';

/** One assertion the compiler does not need, with where it is and the text that replaces it. */
export interface NeedlessAssertion {
  path: string;
  line: number;
  text: string;
  start: number;
  end: number;
  replacement: string;
}

function mayBeNullish(type: ts.Type): boolean {
  const loose =
    ts.TypeFlags.Any | ts.TypeFlags.Unknown | ts.TypeFlags.Null | ts.TypeFlags.Undefined | ts.TypeFlags.Void;
  if (type.flags & loose) return true;
  // a type parameter may be instantiated with undefined
  if (type.flags & ts.TypeFlags.TypeParameter) return true;
  return type.isUnion() && type.types.some(mayBeNullish);
}

function needless(checker: ts.TypeChecker, node: ts.Node): boolean {
  if (ts.isNonNullExpression(node)) {
    // `a!.b` or `a![i]` on the left of an assignment keeps its meaning without the `!`, too
    return !mayBeNullish(checker.getTypeAtLocation(node.expression));
  }
  if (ts.isAsExpression(node) && !ts.isConstTypeReference(node.type)) {
    // primitives only: for object types the checker reports an asserted call's type as the target's
    const primitive = ts.TypeFlags.Number | ts.TypeFlags.String | ts.TypeFlags.Boolean | ts.TypeFlags.BigInt;
    const from = checker.getTypeAtLocation(node.expression);
    return from === checker.getTypeFromTypeNode(node.type) && (from.flags & primitive) !== 0;
  }
  return false;
}

/** Every needless assertion in the given files, judged with the compiler options of `tsconfigPath`. */
export function needlessAssertions(tsconfigPath: string, files: string[], root: string): NeedlessAssertion[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    tsconfigPath,
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic() {} },
  );
  if (config === undefined) throw new Error(`cannot read ${tsconfigPath}`);
  const program = ts.createProgram(files, {
    ...config.options,
    noEmit: true,
    rootDir: undefined,
    baseUrl: dirname(tsconfigPath),
  });
  const checker = program.getTypeChecker();
  const found: NeedlessAssertion[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (source === undefined) continue;
    const visit = (node: ts.Node): void => {
      if (needless(checker, node)) {
        const inner = (node as ts.NonNullExpression | ts.AsExpression).expression;
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        found.push({
          path: relative(root, file),
          line: line + 1,
          text: node.getText(source),
          start: node.getStart(source),
          end: node.getEnd(),
          replacement: inner.getText(source),
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** The text of a file with its outermost needless assertions removed (run again for nested ones). */
export function withoutAssertions(text: string, found: NeedlessAssertion[]): string {
  const outermost = found.filter((a) => !found.some((b) => b !== a && b.start <= a.start && a.end <= b.end));
  let out = text;
  for (const a of outermost.sort((x, y) => y.start - x.start))
    out = out.slice(0, a.start) + a.replacement + out.slice(a.end);
  return out;
}
