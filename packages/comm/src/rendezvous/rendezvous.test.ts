import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explain, findFreePort, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface Outcome {
  phase: string;
  name: string;
  message?: string;
  sum?: number;
}
const phase = (o: RankOutcome, p: string) => (o.results as Outcome[]).find((r) => r.phase === p);

describe('rendezvous', () => {
  it('destroy, then init at once, 15 times: each world meets in its own store (rank 0 may still be closing the last)', async () => {
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('../test/rendezvous.child.ts', import.meta.url),
      args: ['again', '15'],
      timeoutMs: 60_000,
    });
    for (const o of out)
      expect(phase(o, 'again'), explain(out)).toEqual({ phase: 'again', name: 'ok', sums: Array(15).fill(3) });
  }, 90_000);

  it('a second world on the same port and secret is refused, typed, and never mixes with the first', async () => {
    const port = String(await findFreePort());
    const dir = mkdtempSync(join(tmpdir(), 'ddp-rdzv-'));
    const stop = join(dir, 'stop');
    try {
      let bothUp: () => void = () => {};
      const up = new Promise<void>((resolve) => {
        bothUp = resolve;
      });
      let ready = 0;
      const first = spawnRanks({
        nprocs: 2,
        script: new URL('../test/rendezvous.child.ts', import.meta.url),
        args: ['hold', stop],
        env: { MASTER_PORT: port, DDP_RUN_ID: 'run-a' },
        onResult: (_r, res) => (res as Outcome).phase === 'init' && ++ready === 2 && bothUp(),
      });
      await up;
      const second = await spawnRanks({
        nprocs: 2,
        script: new URL('../test/rendezvous.child.ts', import.meta.url),
        args: ['init'],
        env: { MASTER_PORT: port, DDP_RUN_ID: 'run-b' },
        timeoutMs: 30_000,
      });
      writeFileSync(stop, '');
      const a = await first;
      expect(
        a.map((o) => [phase(o, 'init')?.sum, phase(o, 'after')?.sum]),
        explain(a),
      ).toEqual([
        [3, 3],
        [3, 3],
      ]);
      const [b0, b1] = second.map((o) => phase(o, 'init') as Outcome);
      expect(b0?.name, explain(second)).toBe('AddressInUseError');
      expect(b0?.message).toContain(`port ${port} is in use`);
      expect(b1?.name, explain(second)).toBe('RunMismatchError');
      expect(b1?.message).toMatch(/belongs to run "run-a", this rank to run "run-b"/);
      // the first world's store host says why a stranger knocked, and carries on
      expect(a[0]?.stderr).toMatch(/RunMismatchError: .*refused a client of run "run-b"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it.each([
    [0, 2],
    [2, 4],
  ])(
    'rank %i started with WORLD_SIZE=%i among ranks of 3: WorldSizeMismatchError naming both sizes on every rank',
    async (odd, size) => {
      const out = await spawnRanks({
        nprocs: 3,
        script: new URL('../test/rendezvous.child.ts', import.meta.url),
        args: ['init'],
        rankEnv: (r): Record<string, string> => (r === odd ? { WORLD_SIZE: String(size) } : {}),
        timeoutMs: 40_000,
      });
      for (const o of out) {
        const r = phase(o, 'init');
        expect(r?.name, explain(out)).toBe('WorldSizeMismatchError');
        const [mine, theirs] = o.rank === odd ? [size, 3] : [3, size];
        // the rank that recorded the size first learns of the conflict from another rank, which may be any
        expect(r?.message).toMatch(new RegExp(`this rank has WORLD_SIZE=${mine}, rank \\d has ${theirs}`));
      }
    },
    60_000,
  );

  it('a rank started twice (rank 2 never): DuplicateRankError naming it on every process, at once', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('../test/rendezvous.child.ts', import.meta.url),
      args: ['init'],
      rankEnv: (r): Record<string, string> => (r === 2 ? { RANK: '1' } : {}),
      timeoutMs: 40_000,
    });
    for (const o of out) {
      const r = phase(o, 'init');
      // before: a CommTimeoutError after the whole timeout, naming rank 2 as missing
      expect(r?.name, explain(out)).toBe('DuplicateRankError');
      expect(r?.message).toMatch(/rank 1 was started twice \(pid \d+ on .*, then pid \d+ on .*\): two launchers/);
    }
  }, 60_000);

  it('ranks of one node from two launchers (two jobs sharing port, run id and secret): DuplicateRankError on both', async () => {
    // before: job A's rank 0 and job B's rank 1 made one world, and both jobs summed each other's values, exit 0
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('../test/rendezvous.child.ts', import.meta.url),
      args: ['init'],
      rankEnv: (r): Record<string, string> => ({ GROUP_RANK: '0', DDP_LAUNCH_ID: r === 0 ? 'job-a' : 'job-b' }),
      timeoutMs: 40_000,
    });
    for (const o of out) {
      const r = phase(o, 'init');
      expect(r?.name, explain(out)).toBe('DuplicateRankError');
      expect(r?.message).toMatch(/node 0 has ranks of two launchers \(launcher job-., then launcher job-., with rank/);
    }
  }, 60_000);

  it("a later attempt knocking (its node's launcher restarted): the ranks meeting in the earlier one end it, typed", async () => {
    // before: they waited out their timeout and restarted once the later attempt had given up: never met (probe CS)
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('../test/rendezvous.child.ts', import.meta.url),
      args: ['init'],
      rankEnv: (r): Record<string, string> => ({
        DDP_RUN_ID: 'job',
        ...(r === 2 ? { DDP_RESTART_COUNT: '1', RDZV_TIMEOUT_MS: '10000' } : {}),
      }),
      timeoutMs: 40_000,
    });
    const [r0, r1, r2] = out.map((o) => phase(o, 'init'));
    for (const r of [r0, r1]) {
      expect(r?.name, explain(out)).toBe('EarlierAttemptError');
      expect(r?.message).toMatch(/rendezvous: a rank of "job#attempt-1", a later attempt of this run, is waiting/);
    }
    // the later attempt waited for its own store, which nobody restarted to host here
    expect(r2?.name, explain(out)).toBe('CommTimeoutError');
    expect(r2?.message).toMatch(/could not reach the store at 127\.0\.0\.1:\d+ within 10000 ms/);
  }, 60_000);
});
