import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  explainWorld,
  launchOptionsFor,
  mpirunMissing,
  RankLines,
  runMpirun,
  runWorld,
  spawnRanks,
  WorldRunError,
} from './testing.js';

const script = new URL('./test/rank.child.ts', import.meta.url);

describe('runWorld', () => {
  it("returns each rank's RESULT, lines and exit; env reaches every rank", async () => {
    const run = await runWorld<{ rank: number; env: string }>({
      script,
      nprocs: 2,
      args: ['result'],
      env: { EXTRA: 'x' },
    });
    expect(run.exitCode).toBe(0);
    expect(run.results).toEqual([
      { rank: 0, env: 'x' },
      { rank: 1, env: 'x' },
    ]);
    expect(run.ranks.map((r) => [r.code, r.stdout[0], r.stderr[0]])).toEqual([
      [0, 'not a result 0', 'stderr 0'],
      [0, 'not a result 1', 'stderr 1'],
    ]);
  });

  it('rejects with a WorldRunError naming the rank that printed no RESULT', async () => {
    const failure = runWorld({ script, nprocs: 2, args: ['result', '1'] });
    await expect(failure).rejects.toThrow(WorldRunError);
    await expect(failure).rejects.toThrow(/no RESULT line from rank\(s\) 1/);
  });

  it('rejects on a failed rank with the summary; allowFailure resolves with every exit', async () => {
    await expect(runWorld({ script, nprocs: 2, args: ['fail', '1', '3'] })).rejects.toThrow(
      /failed \(exit 1\)[\s\S]*rank 1 failing on purpose/,
    );
    const run = await runWorld({ script, nprocs: 2, args: ['fail', '1', '3'], allowFailure: true });
    expect(run.ranks.map((r) => [r.code, r.endedByLauncher])).toEqual([
      [null, true],
      [3, false],
    ]);
  });

  it('calls onResult as each RESULT arrives; with maxRestarts reports the restarts and every attempt', async () => {
    const seen: [number, unknown][] = [];
    await runWorld({ script, nprocs: 2, args: ['result'], onResult: (rank, r) => seen.push([rank, r]) });
    expect(seen.sort()).toEqual([
      [0, { rank: 0 }],
      [1, { rank: 1 }],
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'run-world-'));
    try {
      const args = ['fail-once', join(dir, 'marker')];
      const run = await runWorld({ script, nprocs: 2, args, maxRestarts: 1, allowFailure: true });
      expect([run.exitCode, run.restarts, run.attempts.length]).toEqual([0, 1, 2]);
      expect(explainWorld(run)).toMatch(/^exit 0\n[\s\S]*\[rank 1\] attempt restart=1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ends a world that outlives timeoutMs', async () => {
    await expect(
      runWorld({ script, nprocs: 1, args: ['fail', '5', '1'], timeoutMs: 1500, killGraceMs: 500 }),
    ).rejects.toThrow(/timed out after 1500 ms/);
  });
});

describe('RankLines', () => {
  it("splits a launcher's prefixed lines by rank, across writes, and parses each rank's RESULT lines", () => {
    const lines = new RankLines<{ n: number }>();
    lines.write('[rank 1] RESULT {"n":');
    lines.write('1}\n[rank 0] hello\nnot a rank line\n[rank 1] RESULT {"n":2}\n');
    expect(lines.byRank).toEqual([['hello'], ['RESULT {"n":1}', 'RESULT {"n":2}']]);
    expect(lines.last(3)).toEqual([undefined, { n: 2 }, undefined]);
    expect(lines.text).toContain('not a rank line');
  });
});

describe('spawnRanks', () => {
  it("gives one rank its own environment, lets every rank run to its end, and parses each rank's RESULT", async () => {
    const outcomes = await spawnRanks({
      script,
      nprocs: 2,
      args: ['result'],
      rankEnv: (rank) => ({ EXTRA: `own ${rank}` }),
    });
    expect(outcomes.map((o) => [o.code, o.results])).toEqual([
      [0, [{ rank: 0, env: 'own 0' }]],
      [0, [{ rank: 1, env: 'own 1' }]],
    ]);
    // rank 1 fails at once; rank 0 is not ended for it, only by the deadline
    // (a deadline rank 1 meets even when the machine is busy: it was 3 s, and a slow start got SIGKILL too)
    const failing = await spawnRanks({ script, nprocs: 2, args: ['fail', '1', '3'], timeoutMs: 8000 });
    expect(failing.map((o) => [o.code, o.signal])).toEqual([
      [null, 'SIGKILL'],
      [3, null],
    ]);
  });

  it('leaves RESULT lines of another format in stdout when parseResults is false', async () => {
    const [o] = await spawnRanks({ script, nprocs: 1, args: ['result'], parseResults: false });
    expect(o?.results).toEqual([]);
    expect(o?.stdout).toContain('RESULT {"rank":0');
  });
});

describe('the compiled twin (tooling/vitest/compiled.js)', () => {
  type Runtime = { ext: string; execArgv: string[]; at: string };
  const fromTwin = (r: Runtime) => {
    expect(r.ext).toBe('.js');
    expect(r.execArgv.join(' ')).not.toMatch(/tsx|@ddp\/source/);
    expect(r.at).toMatch(/rank\.child\.ts:35:/); // source maps: the .ts line
  };

  it('runWorld, spawnRanks and runMpirun start a workspace script as its JavaScript twin, without tsx', async () => {
    expect(process.env.DDP_TEST_COMPILED).toBeDefined();
    for (const r of (await runWorld<Runtime>({ script, nprocs: 2, args: ['runtime'] })).results) fromTwin(r);
    const spawned = await spawnRanks({ script, nprocs: 2, args: ['runtime'] });
    for (const o of spawned) fromTwin(o.results[0] as Runtime);
    if (mpirunMissing() === null)
      for (const o of await runMpirun({ script, np: 2, args: ['runtime'] })) fromTwin(o.results[0] as Runtime);
  }, 60_000);

  it('without a twin (or for a script outside the workspace), the .ts runs under tsx', async () => {
    const twin = process.env.DDP_TEST_COMPILED;
    delete process.env.DDP_TEST_COMPILED;
    try {
      const [r] = (await runWorld<Runtime>({ script, nprocs: 1, args: ['runtime'] })).results;
      expect(r.ext).toBe('.ts');
      expect(r.execArgv.join(' ')).toMatch(/--conditions=@ddp\/source --import \S*tsx/);
    } finally {
      process.env.DDP_TEST_COMPILED = twin;
    }
    const outside = join(tmpdir(), 'x.ts');
    expect(launchOptionsFor(outside)).toEqual({ script: outside, sourceConditions: true, env: process.env });
  });
});
