import { describe, expect, it } from 'vitest';
import { runWorld, WorldRunError } from './testing.js';

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

  it('ends a world that outlives timeoutMs', async () => {
    await expect(
      runWorld({ script, nprocs: 1, args: ['fail', '5', '1'], timeoutMs: 1500, killGraceMs: 500 }),
    ).rejects.toThrow(/timed out after 1500 ms/);
  });
});
