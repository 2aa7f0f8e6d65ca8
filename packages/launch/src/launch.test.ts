import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type LaunchOptions, launch, type WorldStartInfo } from './index.js';
import { Collect, isAlive, killAll, rankScript, started, waitFor } from './test/harness.js';

afterEach(killAll);

interface Run {
  out: Collect;
  err: Collect;
  worlds: WorldStartInfo[];
  options: LaunchOptions;
}

function setup(nprocPerNode: number, args: string[], extra: Partial<LaunchOptions> = {}): Run {
  const out = new Collect();
  const err = new Collect();
  const worlds: WorldStartInfo[] = [];
  const options: LaunchOptions = {
    script: rankScript,
    args,
    nprocPerNode,
    stdout: out,
    stderr: err,
    killGraceMs: 3000,
    env: { ...process.env, DDP_SECRET: undefined },
    onWorldStart: (info) => {
      worlds.push(info);
      for (const pid of info.pids) started.add(pid);
    },
    ...extra,
  };
  return { out, err, worlds, options };
}

function envLines(out: Collect): Map<number, Record<string, unknown>> {
  const byRank = new Map<number, Record<string, unknown>>();
  for (const line of out.lines) {
    const match = /^\[rank (\d+)\] ENV (.*)$/.exec(line);
    if (match) byRank.set(Number(match[1]), JSON.parse(match[2] ?? '{}') as Record<string, unknown>);
  }
  return byRank;
}

describe('launch: environment', () => {
  it.each([1, 2, 3])('sets the torchrun variables on %i rank(s)', { timeout: 30_000 }, async (n) => {
    const unset = { DDP_SECRET: undefined, DDP_NUM_THREADS: undefined, OMP_NUM_THREADS: undefined };
    const run = setup(n, ['env', '--flag', 'value'], { env: { ...process.env, ...unset } });
    const result = await launch(run.options);
    expect(result.exitCode).toBe(0);
    const envs = envLines(run.out);
    expect([...envs.keys()].sort()).toEqual(Array.from({ length: n }, (_, i) => i));
    const port = run.worlds[0]?.masterPort;
    const secret = envs.get(0)?.DDP_SECRET;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const runId = envs.get(0)?.DDP_RUN_ID;
    expect(runId).toMatch(/^[0-9a-f]{32}$/);
    for (const [rank, env] of envs) {
      expect(env).toEqual({
        RANK: String(rank),
        LOCAL_RANK: String(rank),
        WORLD_SIZE: String(n),
        LOCAL_WORLD_SIZE: String(n),
        GROUP_RANK: '0',
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(port),
        DDP_SECRET: secret,
        DDP_RUN_ID: runId,
        DDP_RESTART_COUNT: '0',
        TORCHELASTIC_RESTART_COUNT: '0',
        DDP_NUM_THREADS: String(Math.max(1, Math.floor(availableParallelism() / n))), // the cores shared, as torchrun
        args: ['--flag', 'value'],
      });
    }
  });

  it('keeps the thread count the user chose (DDP_NUM_THREADS, or OMP_NUM_THREADS for @ddp/tensor to read)', {
    timeout: 30_000,
  }, async () => {
    for (const chosen of [{ DDP_NUM_THREADS: '3' }, { OMP_NUM_THREADS: '1' }]) {
      const run = setup(2, ['env'], {
        env: {
          ...process.env,
          DDP_SECRET: undefined,
          DDP_NUM_THREADS: undefined,
          OMP_NUM_THREADS: undefined,
          ...chosen,
        },
      });
      expect((await launch(run.options)).exitCode).toBe(0);
      for (const env of envLines(run.out).values()) {
        expect({ DDP_NUM_THREADS: env.DDP_NUM_THREADS, OMP_NUM_THREADS: env.OMP_NUM_THREADS }).toEqual({
          DDP_NUM_THREADS: undefined,
          OMP_NUM_THREADS: undefined,
          ...chosen,
        });
      }
    }
  });

  it('numbers ranks by node on a multi-node world and passes the given secret and run id', {
    timeout: 30_000,
  }, async () => {
    const shared = { masterAddr: '127.0.0.2', masterPort: 29500, secret: 's3cret', rdzvId: 'job-7' };
    const run = setup(2, ['env'], { nnodes: 3, nodeRank: 1, ...shared });
    const result = await launch(run.options);
    expect(result.exitCode).toBe(0);
    const envs = envLines(run.out);
    expect([...envs.keys()].sort()).toEqual([2, 3]);
    expect(envs.get(3)).toMatchObject({ RANK: '3', LOCAL_RANK: '1', WORLD_SIZE: '6', LOCAL_WORLD_SIZE: '2' });
    expect(envs.get(2)).toMatchObject({
      GROUP_RANK: '1',
      MASTER_ADDR: '127.0.0.2',
      MASTER_PORT: '29500',
      DDP_SECRET: 's3cret',
    });
    expect(envs.get(2)?.DDP_RUN_ID).toBe('job-7');
  });

  it('takes the secret from DDP_SECRET and runs a plain .js script from any cwd', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-launch-'));
    try {
      writeFileSync(join(dir, 'plain.js'), 'console.log("plain", process.env.RANK, process.env.DDP_SECRET);\n');
      const run = setup(2, [], { script: 'plain.js', cwd: dir, env: { ...process.env, DDP_SECRET: 'from-env' } });
      const result = await launch(run.options);
      expect(result.exitCode).toBe(0);
      expect(run.out.lines.sort()).toEqual(['[rank 0] plain 0 from-env', '[rank 1] plain 1 from-env']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('launch: output', () => {
  it('prefixes every line with its rank, whole lines only', { timeout: 30_000 }, async () => {
    const run = setup(2, ['lines']);
    const result = await launch(run.options);
    expect(result.exitCode).toBe(0);
    for (const rank of [0, 1]) {
      const mine = run.out.lines.filter((l) => l.startsWith(`[rank ${rank}] `));
      expect(mine).toEqual(
        [`part-a-${rank}-part-b-${rank}`, `second-${rank}`, `third-${rank}`, `no-newline-${rank}`].map(
          (l) => `[rank ${rank}] ${l}`,
        ),
      );
    }
    expect(run.out.lines).toHaveLength(8);
    expect(run.err.lines.sort()).toEqual(['[rank 0] err-0', '[rank 1] err-1']);
  });
});

describe('launch: log files (torchrun --log-dir, --redirects, --tee)', () => {
  it("writes each rank's streams to <logDir>/<runId>_*/attempt_<n>/<localRank>/, per attempt", {
    timeout: 45_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-logs-'));
    try {
      // rank 0: stdout redirected (file only), stderr tee'd (file and console); rank 1: stderr redirected
      const redirects = new Map([
        [0, 1],
        [1, 2],
      ] as const);
      const tee = new Map([[0, 2]] as const);
      const run = setup(2, ['fail-once', join(dir, 'marker')], {
        logDir: join(dir, 'logs'),
        redirects,
        tee,
        rdzvId: 'job/1',
        maxRestarts: 1,
      });
      const result = await launch(run.options);
      expect(result.exitCode).toBe(0);
      const [runDir, ...more] = readdirSync(join(dir, 'logs'));
      expect(more).toEqual([]);
      expect(runDir).toMatch(/^job_1_/);
      expect(run.err.text).toContain(`[ddp-run] log directory: ${join(dir, 'logs', runDir)}`);
      const read = (attempt: number, localRank: number, stream: string): string =>
        readFileSync(join(dir, 'logs', runDir, `attempt_${attempt}`, String(localRank), `${stream}.log`), 'utf8');
      // (rank 0 of attempt 0 may be ended before it prints)
      expect(read(1, 0, 'stdout')).toBe('attempt restart=1\n');
      expect(read(0, 1, 'stderr')).toContain('Error: first attempt fails');
      expect(readdirSync(join(dir, 'logs', runDir, 'attempt_0', '1'))).toEqual(['stderr.log']);
      // redirected: not on the console; tee'd or not redirected: on the console
      expect(run.out.lines).not.toContain('[rank 0] attempt restart=1');
      expect(run.out.lines).toContain('[rank 1] attempt restart=0');
      expect(run.err.text).not.toContain('[rank 1] Error: first attempt fails');
      // the failure summary still sees redirected output
      expect(run.err.text).toContain('rank 1 exited with code 1; restarting');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // probe AG: ddp-run crashed with an uncaught `listen EADDRNOTAVAIL` (exit 1, which says a rank failed)
  it("refuses a master address that is not this machine's, naming it, before any rank starts", async () => {
    const run = setup(1, ['env'], { masterAddr: '192.0.2.1' });
    await expect(launch(run.options)).rejects.toThrow(
      /^--master-addr 192\.0\.2\.1 \(EADDRNOTAVAIL\): not an address of this machine/,
    );
    expect(run.out.lines).toEqual([]);
  });

  it('refuses redirects without a log directory', async () => {
    await expect(launch(setup(1, ['env'], { redirects: 3 }).options)).rejects.toThrow(
      /redirects and tee write to files under logDir/,
    );
  });
});

describe('launch: failures', () => {
  it('ends the other ranks when one exits 3 and names it in the summary', { timeout: 30_000 }, async () => {
    const run = setup(3, ['fail', '1', '3']);
    const result = await launch(run.options);
    expect(result.exitCode).toBe(1);
    expect(result.failure).toMatchObject({ rank: 1, code: 3, signal: null, endedByLauncher: false });
    const others = result.attempts[0]?.exits.filter((e) => e.rank !== 1);
    expect(others?.map((e) => [e.endedByLauncher, e.signal])).toEqual([
      [true, 'SIGTERM'],
      [true, 'SIGTERM'],
    ]);
    expect(result.summary).toContain('FAILED: rank 1 exited with code 3');
    expect(result.summary).toContain('Error: rank 1 failing on purpose');
    expect(result.summary).toContain('rank 0: was killed by SIGTERM (ended by ddp-run)');
    expect(run.err.text).toContain(result.summary);
    for (const pid of run.worlds[0]?.pids ?? []) expect(isAlive(pid)).toBe(false);
  });

  // probe AG: the rank that threw was listed "exited with code 1 (ended by ddp-run)", its error left out
  it('a rank that fails by itself after ddp-run signalled it is listed with its own error', {
    timeout: 30_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-launch-'));
    try {
      const result = await launch(setup(2, ['fail-after-peer', dir]).options);
      expect(result.failure).toMatchObject({ rank: 0, code: 1 });
      expect(result.summary).toContain('rank 1: exited with code 4 — Error: rank 1 failing in its own cleanup');
      expect(result.summary).not.toContain('(ended by ddp-run)');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the signal when a rank is killed by SIGKILL', { timeout: 30_000 }, async () => {
    const run = setup(2, ['sigkill', '0']);
    const result = await launch(run.options);
    expect(result.exitCode).toBe(1);
    expect(result.failure).toMatchObject({ rank: 0, code: null, signal: 'SIGKILL' });
    expect(result.summary).toContain('FAILED: rank 0 was killed by SIGKILL');
  });

  it('sends SIGKILL to ranks that ignore SIGTERM once the grace period is over', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-launch-'));
    try {
      const controller = new AbortController();
      const run = setup(2, ['pids', dir, 'ignore-term'], { signal: controller.signal, killGraceMs: 500 });
      const pending = launch(run.options);
      await waitFor('both ranks ready', () => readdirSync(dir).length === 2);
      controller.abort();
      const result = await pending;
      expect(result.interrupted).toBe('SIGTERM');
      expect(result.exitCode).toBe(143);
      expect(result.attempts[0]?.exits.map((e) => e.signal)).toEqual(['SIGKILL', 'SIGKILL']);
      expect(run.out.text).toContain('ignoring SIGTERM');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('launch: restarts', () => {
  it('restarts the world after a failure and tells the script the restart count', { timeout: 45_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-launch-'));
    try {
      const run = setup(2, ['fail-once', join(dir, 'marker')], { maxRestarts: 2 });
      const result = await launch(run.options);
      expect(result.exitCode).toBe(0);
      expect(result.restarts).toBe(1);
      expect(result.attempts.map((a) => a.failed?.rank)).toEqual([1, undefined]);
      expect(run.worlds.map((w) => w.restartCount)).toEqual([0, 1]);
      expect(run.out.lines).toContain('[rank 0] attempt restart=1');
      expect(run.out.lines).toContain('[rank 1] attempt restart=1');
      expect(run.err.text).toContain('[ddp-run] rank 1 exited with code 1; restarting the world (restart 1 of 2)');
      expect(result.summary).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails once the restarts are used up', { timeout: 60_000 }, async () => {
    const run = setup(2, ['always-fail'], { maxRestarts: 2 });
    const result = await launch(run.options);
    expect(result.exitCode).toBe(1);
    expect(result.restarts).toBe(2);
    expect(result.attempts).toHaveLength(3);
    expect(run.out.lines.filter((l) => l.startsWith('[rank 0] attempt')).sort()).toEqual([
      '[rank 0] attempt restart=0',
      '[rank 0] attempt restart=1',
      '[rank 0] attempt restart=2',
    ]);
    expect(result.summary).toContain('FAILED: rank 0 exited with code 7');
    expect(result.summary).toContain('restarts: 2 of 2 used');
  });
});
