import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LaunchConfigError, type LaunchOptions, lastErrorLines, planLaunch, type RankExit, rankEnv } from './index.js';
import { rankScript } from './test/harness.js';

const base: LaunchOptions = { script: rankScript, nprocPerNode: 2, env: {} };

describe('planLaunch', () => {
  it.each<[string, Partial<LaunchOptions>, RegExp]>([
    ['no ranks', { nprocPerNode: 0 }, /nprocPerNode must be an integer ≥ 1, got 0/],
    ['a fractional rank count', { nprocPerNode: 1.5 }, /nprocPerNode must be an integer/],
    ['a node rank past the last node', { nnodes: 2, nodeRank: 2 }, /nodeRank must be an integer in \[0, 1\], got 2/],
    ['negative restarts', { maxRestarts: -1 }, /maxRestarts must be an integer ≥ 0/],
    ['port 0', { masterPort: 0 }, /masterPort must be an integer in \[1, 65535\]/],
    ['a missing script', { script: 'nope.ts' }, /script not found: .*nope\.ts/],
    ['an empty script path', { script: '' }, /script must name the file/],
    ['a directory as the script', { script: '.' }, /script is not a file/],
    ['an empty secret', { secret: '' }, /secret must not be empty/],
    ['multi-node without address', { nnodes: 2, masterPort: 1, secret: 's' }, /needs masterAddr/],
    ['multi-node without port', { nnodes: 2, masterAddr: 'h', secret: 's' }, /needs masterPort/],
    ['multi-node without secret', { nnodes: 2, masterAddr: 'h', masterPort: 1, rdzvId: 'r' }, /needs a shared secret/],
    ['multi-node without run id', { nnodes: 2, masterAddr: 'h', masterPort: 1, secret: 's' }, /needs a shared run id/],
    ['a run id with a space', { rdzvId: 'my run' }, /rdzvId must be 1 to 255 printable ASCII/],
    ['a secret and a secret file', { secret: 's', secretFile: 'f' }, /secret or secretFile, not both/],
    ['a missing secret file', { secretFile: '/nonexistent/secret' }, /secretFile: cannot read \/nonexistent\/secret/],
  ])('rejects %s', (_what, change, message) => {
    expect(() => planLaunch({ ...base, ...change })).toThrow(LaunchConfigError);
    expect(() => planLaunch({ ...base, ...change })).toThrow(message);
  });

  it('draws a fresh secret per run unless one is given', () => {
    const a = planLaunch(base).secret;
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(planLaunch(base).secret).not.toBe(a);
    expect(planLaunch({ ...base, env: { DDP_SECRET: 'env' } }).secret).toBe('env');
    expect(planLaunch({ ...base, env: { DDP_SECRET: 'env' }, secret: 'flag' }).secret).toBe('flag');
  });
});

describe('secretFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ddp-secret-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const secretFile = (name: string, text: string, mode: number): string => {
    const file = join(dir, name);
    writeFileSync(file, text);
    chmodSync(file, mode);
    return file;
  };

  it('reads the secret from a file only its owner can read', () => {
    expect(planLaunch({ ...base, secretFile: secretFile('ok', 'from-file\n', 0o600) }).secret).toBe('from-file');
    const readOnly = secretFile('ro', 'read-only', 0o400);
    expect(planLaunch({ ...base, secretFile: readOnly, env: { DDP_SECRET: 'env' } }).secret).toBe('read-only');
  });

  it.each([0o644, 0o640, 0o604, 0o660])('refuses a file with mode %o, as ssh does with keys', (mode) => {
    const file = secretFile(`open-${mode}`, 'leaky', mode);
    expect(() => planLaunch({ ...base, secretFile: file })).toThrow(LaunchConfigError);
    const why = `is readable by group or others (mode 0${mode.toString(8)}); run chmod 600`;
    expect(() => planLaunch({ ...base, secretFile: file })).toThrow(why);
  });

  it('refuses an empty file', () => {
    expect(() => planLaunch({ ...base, secretFile: secretFile('empty', '\n', 0o600) })).toThrow(/is empty/);
  });
});

describe('run id', () => {
  it('is random per launch unless rdzvId is given; every rank gets DDP_RUN_ID and TORCHELASTIC_RUN_ID', () => {
    const a = planLaunch(base);
    expect(a.runId).toMatch(/^[0-9a-f]{32}$/);
    expect(planLaunch(base).runId).not.toBe(a.runId);
    const given = planLaunch({ ...base, rdzvId: 'job-42' });
    expect(rankEnv(given, 1, 29500, 0)).toMatchObject({ DDP_RUN_ID: 'job-42', TORCHELASTIC_RUN_ID: 'job-42' });
  });
});

function exitWith(stderrTail: string[], stdoutTail: string[] = []): RankExit {
  return { rank: 0, localRank: 0, pid: 1, code: 1, signal: null, endedByLauncher: false, stderrTail, stdoutTail };
}

describe('lastErrorLines', () => {
  it("picks Node's error line and the frames after it", () => {
    const tail = [
      '/x.ts:3',
      '  throw e',
      '  ^',
      '',
      'PeerLostError: rank 2 lost during allReduce',
      '    at a (x.ts:3:9)',
      '    at b (x.ts:9:1)',
      '    at c (x.ts:12:1)',
      '',
      'Node.js v20.20.2',
    ];
    expect(lastErrorLines(exitWith(tail))).toEqual([
      'PeerLostError: rank 2 lost during allReduce',
      '    at a (x.ts:3:9)',
      '    at b (x.ts:9:1)',
    ]);
  });

  it('falls back to the last lines, and to stdout when stderr is empty', () => {
    expect(lastErrorLines(exitWith(['a', 'b', 'c', 'd', '']))).toEqual(['b', 'c', 'd']);
    expect(lastErrorLines(exitWith([], ['only stdout']))).toEqual(['only stdout']);
  });
});
