import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { explain, type RankOutcome, spawnRanks } from '@ddp/launch/testing';
import { describe, expect, it } from 'vitest';

interface Outcome {
  phase: string;
  name: string;
  message?: string;
  ranks?: number[];
}
const phase = (o: RankOutcome, p: string) => (o.results as Outcome[]).find((r) => r.phase === p);

describe('a rank stopped past the heartbeat limit, then continued', () => {
  it('says that it was itself stalled (RankStalledError), while its peers name it as lost', async () => {
    const victim = 1;
    const children = new Map<number, ChildProcess>();
    let started = 0;
    let survivorsDone = 0;
    const out = await spawnRanks({
      nprocs: 3,
      script: new URL('./test/faults.child.ts', import.meta.url),
      args: ['kill'],
      env: { DDP_HEARTBEAT_MS: '300' },
      timeoutMs: 60_000,
      onSpawn: (r, c) => children.set(r, c),
      onResult: (r, res) => {
        const p = (res as Outcome).phase;
        if (p === 'started' && ++started === 3) setTimeout(() => children.get(victim)?.kill('SIGSTOP'), 300);
        // continue the victim only once both peers have given it up
        if (p === 'loop' && r !== victim && ++survivorsDone === 2) children.get(victim)?.kill('SIGCONT');
      },
    });
    for (const o of out.filter((x) => x.rank !== victim)) {
      expect(phase(o, 'loop')?.name, explain(out)).toBe('PeerLostError');
      expect(phase(o, 'loop')?.ranks).toEqual([victim]);
    }
    const own = phase(out[victim] as RankOutcome, 'loop');
    expect(own?.name, `${JSON.stringify(own)}\n${explain(out)}`).toBe('RankStalledError');
    expect(own?.message).toMatch(/rank 1: this rank was stalled for \d+ ms .*longer than its peers wait \(3000 ms\)/);
    expect(own?.ranks).toEqual([victim]);
  }, 90_000);

  it('all ranks stopped together (a paused machine), then continued: nobody is blamed, the world goes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ddp-stall-'));
    const stop = join(dir, 'stop');
    try {
      const children: ChildProcess[] = [];
      let up = 0;
      let allUp: () => void = () => {};
      const ready = new Promise<void>((resolve) => {
        allUp = resolve;
      });
      const world = spawnRanks({
        nprocs: 3,
        script: new URL('./test/rendezvous.child.ts', import.meta.url),
        args: ['hold', stop],
        env: { DDP_HEARTBEAT_MS: '300' },
        timeoutMs: 60_000,
        onSpawn: (_r, c) => children.push(c),
        onResult: (_r, res) => (res as Outcome).phase === 'init' && ++up === 3 && allUp(),
      });
      await ready;
      for (const c of children) c.kill('SIGSTOP');
      await sleep(4500); // past the 3000 ms heartbeat limit
      for (const c of children) c.kill('SIGCONT');
      await sleep(1500); // several heartbeat ticks, each of which used to find every peer silent
      writeFileSync(stop, '');
      const out = await world;
      expect(
        out.map((o) => (phase(o, 'after') as { sum?: number } | undefined)?.sum),
        explain(out),
      ).toEqual([6, 6, 6]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
