import { explain, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface Outcome {
  phase: string;
  name: string;
  message?: string;
  ranks?: number[];
  at?: number;
}
const results = (o: RankOutcome) => o.results as Outcome[];
const phase = (o: RankOutcome, p: string) => results(o).find((r) => r.phase === p);

/**
 * Three ranks loop large allReduces; once all have started, `signal` hits the victim. The
 * survivors must raise PeerLostError naming it within `limitMs` (then the victim is killed):
 * 5 s for a death the sockets report; a silent peer is found by the heartbeat, whose
 * interval × 10 is only a floor on a loaded machine, so it gets more slack.
 */
async function loseVictim(
  victim: number,
  signal: NodeJS.Signals,
  limitMs: number,
  env: Record<string, string> = {},
  args = ['kill'],
): Promise<void> {
  let hitAt = 0;
  let reported = 0;
  const started = new Set<number>();
  const children = new Map<number, import('node:child_process').ChildProcess>();
  const out = await spawnRanks({
    nprocs: 3,
    script: new URL('./test/faults.child.ts', import.meta.url),
    args,
    env,
    timeoutMs: 60_000,
    onSpawn: (r, c) => children.set(r, c),
    onResult: (r, res) => {
      const p = (res as Outcome).phase;
      if (p === 'started') started.add(r);
      if (p === 'started' && started.size === 3) {
        setTimeout(() => {
          hitAt = Date.now();
          children.get(victim)?.kill(signal);
        }, 300);
      } else if (p === 'loop' && ++reported === 2) children.get(victim)?.kill('SIGKILL');
    },
  });
  for (const o of out.filter((x) => x.rank !== victim)) {
    const r = phase(o, 'loop');
    expect(r?.name, explain(out)).toBe('PeerLostError');
    expect(r?.ranks).toEqual([victim]);
    expect(r?.message).toContain(`rank ${victim}`);
    expect((r?.at ?? Number.POSITIVE_INFINITY) - hitAt).toBeLessThan(limitMs);
  }
}

describe('faults', () => {
  it(
    'kill -9 of a rank during large allReduces: every other rank raises PeerLostError naming it',
    () => loseVictim(1, 'SIGKILL', 5000),
    90_000,
  );

  it(
    'kill -9 of a rank during small allReduces on the fast path: every other rank raises PeerLostError naming it',
    () => loseVictim(2, 'SIGKILL', 5000, {}, ['kill', 'small']),
    90_000,
  );

  it(
    'a rank that stops answering (SIGSTOP, sockets open): PeerLostError naming it by heartbeat (300 ms × 10)',
    () => loseVictim(2, 'SIGSTOP', 15_000, { DDP_HEARTBEAT_MS: '300' }),
    90_000,
  );

  it('allGather on one rank while the others allReduce: CollectiveMismatchError on every rank', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['mismatch'],
      timeoutMs: 40_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) {
      expect(phase(o, 'collective')?.name).toBe('CollectiveMismatchError');
      expect(phase(o, 'collective')?.message).toMatch(/allGather/);
      expect(phase(o, 'after')?.name).toBe('CollectiveMismatchError');
    }
  }, 60_000);

  it('a different element count on one rank (ring-sized): CollectiveMismatchError on every rank', async () => {
    const out = await spawnRanks({
      nprocs: 4,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['count'],
      timeoutMs: 40_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) expect(phase(o, 'collective')?.name, o.stdout).toBe('CollectiveMismatchError');
  }, 60_000);

  it('counts so different that ranks run the collective on different threads: CollectiveMismatchError on every rank', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['route'],
      timeoutMs: 40_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    for (const o of out) {
      expect(phase(o, 'collective')?.name, o.stdout).toBe('CollectiveMismatchError');
      expect(phase(o, 'after')?.name, o.stdout).toBe('CollectiveMismatchError');
    }
  }, 60_000);

  it('a rank that never arrives: CommTimeoutError on every other rank naming the collective and that rank', async () => {
    // a ring: most ranks wait on a neighbour that is itself waiting; the probe finds rank 3
    const out = await spawnRanks({
      nprocs: 4,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['timeout'],
      timeoutMs: 40_000,
    });
    for (const o of out.filter((x) => x.rank !== 3)) {
      const r = phase(o, 'collective');
      expect(r?.name, explain(out)).toBe('CommTimeoutError');
      expect(r?.message).toMatch(/allReduce\(float32, count 300000, sum, seq 1\)/);
      expect(r?.ranks).toEqual([3]);
    }
  }, 60_000);

  it('a rank with the wrong secret is refused with AuthError', async () => {
    const out = await spawnRanks({
      nprocs: 2,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['auth'],
      rankEnv: (r): Record<string, string> => (r === 1 ? { DDP_SECRET: 'not-the-secret' } : {}),
      timeoutMs: 40_000,
    });
    expect(phase(out[1] as RankOutcome, 'init')?.name, explain(out)).toBe('AuthError');
    expect(phase(out[0] as RankOutcome, 'init')?.name).toBe('CommTimeoutError');
  }, 60_000);

  it('random bytes sent to every listening port crash nothing; the next collectives complete', async () => {
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['fuzz'],
      timeoutMs: 40_000,
    });
    expect(
      out.every((o) => o.code === 0),
      explain(out),
    ).toBe(true);
    expect((phase(out[0] as RankOutcome, 'fuzzed') as unknown as { sent: number }).sent).toBeGreaterThan(20);
    for (const o of out) expect(phase(o, 'collective')?.name).toBe('ok');
  }, 60_000);
});
