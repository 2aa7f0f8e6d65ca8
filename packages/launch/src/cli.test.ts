import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { binPath, Collect, isAlive, killAll, rankScript, started, waitFor } from './test/harness.js';

afterEach(killAll);

interface Cli {
  child: ChildProcess;
  out: Collect;
  err: Collect;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the real bin, as a user would: `node bin/ddp-run.js …`. */
function ddpRun(args: string[]): Cli {
  // a scheduler's variables (a CI job under Slurm or in a pod) would fill in ddp-run's flags
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(SLURM_|PET_|KUBERNETES_)/.test(k)));
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  if (child.pid !== undefined) started.add(child.pid);
  const out = new Collect();
  const err = new Collect();
  child.stdout?.pipe(out);
  child.stderr?.pipe(err);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  return { child, out, err, exited };
}

describe('ddp-run CLI', () => {
  it('prints usage on --help and exits 0', { timeout: 30_000 }, async () => {
    const cli = ddpRun(['--help']);
    expect((await cli.exited).code).toBe(0);
    expect(cli.out.text).toContain('--nproc-per-node <n>');
    expect(cli.out.text).toContain('--max-restarts <r>');
  });

  it('exits 2 on a bad flag value, a missing script, a multi-node run without address', {
    timeout: 30_000,
  }, async () => {
    const bad = ddpRun(['--nproc-per-node', 'two', rankScript]);
    const missing = ddpRun(['--nproc-per-node', '2', 'no-such-script.ts']);
    expect((await bad.exited).code).toBe(2);
    expect(bad.err.text).toContain("argument 'two' is invalid");
    expect((await missing.exited).code).toBe(2);
    expect(missing.err.text).toContain('ddp-run: script not found');
    const multiNode = ddpRun([
      '--nproc-per-node',
      '1',
      '--nnodes',
      '2',
      '--master-port',
      '29500',
      '--secret',
      's',
      rankScript,
    ]);
    expect((await multiNode.exited).code).toBe(2);
    expect(multiNode.err.text).toContain('ddp-run: nnodes > 1 needs masterAddr (--master-addr)');
  });

  it('runs a world and passes flags after the script to it', { timeout: 30_000 }, async () => {
    const cli = ddpRun(['--nproc-per-node', '2', rankScript, 'env', '--nproc-per-node', '9']);
    expect((await cli.exited).code).toBe(0);
    const envs = cli.out.lines.map((l) => JSON.parse(l.replace(/^\[rank \d\] ENV /, '')) as Record<string, unknown>);
    expect(envs.map((e) => e.WORLD_SIZE)).toEqual(['2', '2']);
    // one run id per launch, the same on every rank
    expect(envs[0]?.DDP_RUN_ID).toMatch(/^[0-9a-f]{32}$/);
    expect(envs[1]?.DDP_RUN_ID).toBe(envs[0]?.DDP_RUN_ID);
    expect(envs[0]?.args).toEqual(['--nproc-per-node', '9']);
  });

  it('warns that ps shows --secret; --secret-file is quiet and reaches the ranks', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-cli-'));
    try {
      const flag = ddpRun(['--nproc-per-node', '1', '--secret', 'on-the-command-line', rankScript, 'env']);
      expect((await flag.exited).code).toBe(0);
      const warning = /^ddp-run: warning: --secret shows the secret to every user .*--secret-file/;
      expect(flag.err.lines).toEqual([expect.stringMatching(warning)]);
      const file = join(dir, 'secret');
      writeFileSync(file, 'in-a-file\n', { mode: 0o600 });
      const quiet = ddpRun(['--nproc-per-node', '1', '--secret-file', file, rankScript, 'env']);
      expect((await quiet.exited).code).toBe(0);
      expect(quiet.err.text).toBe('');
      expect(JSON.parse(quiet.out.lines[0].replace(/^\[rank 0\] ENV /, '')).DDP_SECRET).toBe('in-a-file');
      chmodSync(file, 0o644);
      const open = ddpRun(['--nproc-per-node', '1', '--secret-file', file, rankScript, 'env']);
      expect((await open.exited).code).toBe(2);
      expect(open.err.text).toContain('is readable by group or others (mode 0644)');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("runs torchrun's command line: underscores, --standalone, --log_dir with -r 3", { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-cli-'));
    try {
      const cli = ddpRun(['--standalone', '--nproc_per_node=2', '--log_dir', dir, '-r', '3', rankScript, 'env']);
      expect((await cli.exited).code).toBe(0);
      expect(cli.out.text).toBe('');
      const [runDir] = readdirSync(dir);
      const env = (r: number) =>
        JSON.parse(readFileSync(join(dir, runDir, 'attempt_0', String(r), 'stdout.log'), 'utf8').replace(/^ENV /, ''));
      expect([env(0).RANK, env(1).RANK, env(1).WORLD_SIZE]).toEqual(['0', '1', '2']);
      expect(runDir.startsWith(`${env(0).DDP_RUN_ID}_`)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 1 with the summary when a rank fails', { timeout: 30_000 }, async () => {
    const cli = ddpRun(['--nproc-per-node', '2', rankScript, 'fail', '0', '3']);
    expect((await cli.exited).code).toBe(1);
    expect(cli.err.text).toContain('[ddp-run] FAILED: rank 0 exited with code 3');
  });

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129], // probe CS: killed ddp-run at once, its ranks SIGKILLed by the watch, no handler ran
    ['SIGQUIT', 131],
  ] as const)('forwards %s to the ranks and leaves no process behind', { timeout: 30_000 }, async (signal, code) => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-cli-'));
    try {
      const cli = ddpRun(['--nproc-per-node', '2', rankScript, 'pids', dir]);
      await waitFor('both ranks to write their pids', () => readdirSync(dir).length === 2);
      const pids = readdirSync(dir).map((f) => Number(readFileSync(join(dir, f), 'utf8')));
      for (const pid of pids) started.add(pid);
      expect(pids.every(isAlive)).toBe(true);
      cli.child.kill(signal);
      expect(await cli.exited).toEqual({ code, signal: null });
      expect(cli.err.text).toContain(`[ddp-run] interrupted by ${signal}; ranks ended`);
      await waitFor('the ranks to be gone', () => !pids.some(isAlive), 5000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sends SIGKILL at once on a second signal to ranks that ignore the first', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-cli-'));
    try {
      const cli = ddpRun([
        '--nproc-per-node',
        '2',
        '--kill-grace-ms',
        '600000',
        rankScript,
        'pids',
        dir,
        'ignore-term',
      ]);
      await waitFor('both ranks to write their pids', () => readdirSync(dir).length === 2);
      const pids = readdirSync(dir).map((f) => Number(readFileSync(join(dir, f), 'utf8')));
      for (const pid of pids) started.add(pid);
      cli.child.kill('SIGTERM');
      await waitFor(
        'both ranks to ignore SIGTERM',
        () => cli.out.lines.filter((l) => l.endsWith('ignoring SIGTERM')).length === 2,
      );
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toEqual({ code: 143, signal: null });
      await waitFor('the ranks to be gone', () => !pids.some(isAlive), 5000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // before: the ranks trained on unsupervised; restarted, a new world saved beside them into the same checkpoint
  // directory
  it('ranks end themselves when ddp-run is killed with SIGKILL', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-cli-'));
    try {
      const cli = ddpRun(['--nproc-per-node', '2', rankScript, 'pids', dir, 'ignore-term']);
      await waitFor('both ranks to write their pids', () => readdirSync(dir).length === 2);
      const pids = readdirSync(dir).map((f) => Number(readFileSync(join(dir, f), 'utf8')));
      for (const pid of pids) started.add(pid);
      cli.child.kill('SIGKILL');
      expect(await cli.exited).toEqual({ code: null, signal: 'SIGKILL' });
      await waitFor('the orphaned ranks to be gone', () => !pids.some(isAlive), 5000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
