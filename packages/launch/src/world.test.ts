import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { launch } from './index.js';
import { Collect } from './test/harness.js';
import { scriptArgs } from './world.js';

const usesTsx = (args: string[]) => args.some((a) => /[\\/]tsx[\\/]/.test(a));

describe('scriptArgs: the TypeScript loader only where TypeScript runs', () => {
  it('leaves it out for a JavaScript script on built packages', () => {
    const args = scriptArgs('/app/dist/train.js', ['--steps', '3'], false, ['file:///watch.js']);
    expect(usesTsx(args)).toBe(false);
    expect(args).toEqual(['--import', 'file:///watch.js', '/app/dist/train.js', '--steps', '3']);
  });

  it.each(['/app/train.ts', '/app/train.mts', '/app/train.cts'])('adds it for %s', (script) => {
    expect(usesTsx(scriptArgs(script, [], false))).toBe(true);
  });

  it('adds it for a TypeScript import or when the packages resolve to src/', () => {
    expect(usesTsx(scriptArgs('/app/train.js', [], false, ['file:///hook.ts']))).toBe(true);
    const onSource = scriptArgs('/app/train.js', [], true);
    expect(onSource[0]).toBe('--conditions=@ddp/source');
    expect(usesTsx(onSource)).toBe(true);
  });
});

describe('launch: a JavaScript rank on built packages', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ddp-world-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('starts without the TypeScript loader and with the launcher watch', { timeout: 30_000 }, async () => {
    const script = join(dir, 'rank.mjs');
    writeFileSync(script, "console.log('ARGV ' + JSON.stringify(process.execArgv));\n");
    const out = new Collect();
    const result = await launch({ script, args: [], nprocPerNode: 2, sourceConditions: false, stdout: out });
    expect(result.exitCode).toBe(0);
    const argvs = out.lines.filter((l) => l.includes('ARGV ')).map((l) => JSON.parse(l.split('ARGV ')[1]) as string[]);
    expect(argvs).toHaveLength(2);
    for (const argv of argvs) {
      expect(usesTsx(argv)).toBe(false);
      expect(argv.some((a) => a.endsWith('/launcher-watch.js'))).toBe(true);
    }
  });
});
