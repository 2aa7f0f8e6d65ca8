import { describe, expect, it } from 'vitest';
import { checkedNames, declaredBooleanOptions, uncheckedBooleanOptions } from './boolean-options.js';
import type { WorkspacePackage } from './scan.js';

const source = (text: string): WorkspacePackage => ({
  dir: 'packages/x',
  name: '@ddp/x',
  runtime: new Set(),
  dev: new Set(),
  native: false,
  build: null,
  files: [{ path: 'packages/x/src/layer.ts', text }],
});

const options = `export interface LayerOptions {
  /** Add a bias. */
  bias?: boolean;
  readonly causal?: boolean;
  eps?: number;
}
interface Internal {
  spun?: boolean;
}
`;

describe('boolean options', () => {
  it("finds the boolean members of *Options interfaces, not other interfaces' or other types", () => {
    expect(declaredBooleanOptions(options)).toEqual([
      { name: 'bias', owner: 'LayerOptions', line: 3 },
      { name: 'causal', owner: 'LayerOptions', line: 4 },
    ]);
  });

  it('takes the checked names from the checks, not from the lists of known names', () => {
    expect(checkedNames(`checkOptions('sum', dims, ['dim', 'keepdim'], ['keepdim']);`)).toEqual(new Set(['keepdim']));
    expect(checkedNames(`checkOptions('sum', dims, ['dim', 'keepdim']);`)).toEqual(new Set());
    expect(checkedNames(`moduleOptions('Linear', opts);`)).toEqual(new Set());
    expect(checkedNames(`moduleOptions('Linear', opts, ['bias']);`)).toEqual(new Set(['bias']));
    expect(checkedNames(`moduleOptions('LayerNorm', opts, ['bias'], ['eps']);`)).toEqual(new Set(['bias']));
    expect(checkedNames(`booleanOption('DataLoader', 'shuffle', opts.shuffle, false)`)).toEqual(new Set(['shuffle']));
    const named = `const flags = ['a', 'b'];\ncheckBooleanOptions('x', opts, flags, (m) => new E(m));`;
    expect(checkedNames(named)).toEqual(new Set(['a', 'b']));
  });

  it('reports an option no check names, and passes once one does', () => {
    expect(uncheckedBooleanOptions([source(options)])).toEqual([
      'packages/x/src/layer.ts:3: LayerOptions.bias is read without checkBooleanOptions',
      'packages/x/src/layer.ts:4: LayerOptions.causal is read without checkBooleanOptions',
    ]);
    const checked = `${options}moduleOptions('Layer', opts, ['bias', 'causal']);\n`;
    expect(uncheckedBooleanOptions([source(checked)])).toEqual([]);
  });
});
