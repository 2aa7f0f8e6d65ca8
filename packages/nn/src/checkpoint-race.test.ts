import { mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { markParameterShard } from '@ddp/autograd';
import { explain, spawnRanks } from '@ddp/launch/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { LATEST_LINK } from './checkpoint-dir.js';
import { modelAtStep } from './test/checkpoint-crash-model.js';

/**
 * Several processes saving into one checkpoint directory at once (every rank saving, or two jobs
 * given one path), while this process loads it over and over. Commits must be one after the
 * other: each its own generation, a save that began after another ended newer than it, and every
 * load a complete checkpoint no older than the one loaded before it.
 */
const WRITERS = 4;
const SAVES = 20;

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-race-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Save {
  writer: number;
  step: number;
  entry: string;
  start: bigint;
  end: bigint;
}
const generationOf = (entry: string) => Number(/^(\d{8})-step-/.exec(basename(entry))?.[1]);

/** Loads dir into a fresh model: the entry read, its step and whether the weights are that step's. */
async function load(dir: string): Promise<{ entry: string; step: number; weightsMatch: boolean }> {
  const model = modelAtStep(-1);
  try {
    const { step, path } = await loadCheckpoint(dir, { model });
    const expected = modelAtStep(step);
    const values = (t: { dataSync(): ArrayLike<number> } | undefined) => String(t?.dataSync());
    const weightsMatch = [...model.stateDict()].every(([k, t]) => values(t) === values(expected.stateDict().get(k)));
    expected.dispose();
    return { entry: path, step, weightsMatch };
  } finally {
    model.dispose();
  }
}

describe('several processes saving into one checkpoint directory at once', () => {
  it('commit one after the other: no generation twice, none older than a save acknowledged before', async () => {
    const dir = join(root, 'shared');
    let running = true;
    const loads: Awaited<ReturnType<typeof load>>[] = [];
    const reader = (async () => {
      for (; running; await new Promise((resolve) => setTimeout(resolve, 5))) {
        if (!(await readdir(dir).catch(() => [] as string[])).includes(LATEST_LINK)) continue;
        loads.push(await load(dir).catch((error) => ({ entry: `failed: ${error}`, step: -1, weightsMatch: false })));
      }
    })();
    const outcomes = await spawnRanks({
      nprocs: WRITERS,
      script: new URL('./test/checkpoint-race.child.ts', import.meta.url),
      args: [dir, String(SAVES)],
      timeoutMs: 100_000,
    }).finally(() => {
      running = false;
    });
    await reader;
    expect(
      outcomes.every((o) => o.code === 0),
      explain(outcomes),
    ).toBe(true);
    const saves = outcomes.flatMap((o) => o.results as Record<keyof Save, string | number>[]);
    const all: Save[] = saves.map((s) => ({ ...s, start: BigInt(s.start), end: BigInt(s.end) }) as Save);
    expect(all).toHaveLength(WRITERS * SAVES);

    const generations = all.map((s) => generationOf(s.entry));
    expect(new Set(generations).size, `generations ${generations.sort((a, b) => a - b)}`).toBe(all.length);
    for (const x of all) {
      for (const y of all) {
        if (x.end < y.start)
          expect(generationOf(x.entry), `${x.entry} acknowledged before ${y.entry} began`).toBeLessThan(
            generationOf(y.entry),
          );
      }
    }

    expect(loads.length, 'loads while the writers ran').toBeGreaterThan(0);
    for (const [i, l] of loads.entries()) {
      expect(l.weightsMatch, `load ${i}: ${l.entry}`).toBe(true);
      if (i > 0)
        expect(generationOf(l.entry), `load ${i} after ${loads[i - 1]?.entry}`).toBeGreaterThanOrEqual(
          generationOf(loads[i - 1]?.entry ?? ''),
        );
    }
    const newest = all.reduce((a, b) => (generationOf(a.entry) > generationOf(b.entry) ? a : b));
    expect(await load(dir)).toEqual({ entry: newest.entry, step: newest.step, weightsMatch: true });
    expect((await readdir(dir)).sort()).toEqual([basename(newest.entry), LATEST_LINK].sort());
    expect(await readlink(join(dir, LATEST_LINK))).toBe(basename(newest.entry));
  }, 120_000);
});

describe('one process starting saves before the earlier ones finished (saves not awaited at once)', () => {
  // the commit order was the lock retries': step 10 committed after step 11 in 7 of 20 trials, and its
  // clean-up deleted step 11; 20 saves in a row left step 9 as the newest
  it('commit in the order they were called: the newest step is the one loaded, the others cleaned up', async () => {
    for (let trial = 0; trial < 10; trial++) {
      const dir = join(root, `overlap-${trial}`);
      const models = Array.from({ length: 8 }, (_, i) => modelAtStep(10 + i));
      const saves = models.map((model, i) => saveCheckpoint(dir, { model, step: 10 + i }));
      const entries = await Promise.all(saves);
      expect(entries.map(generationOf), `trial ${trial}`).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(await load(dir), `trial ${trial}`).toEqual({ entry: entries[7], step: 17, weightsMatch: true });
      expect((await readdir(dir)).sort()).toEqual([basename(entries[7]), LATEST_LINK].sort());
      for (const m of models) m.dispose();
    }
  }, 60_000);

  it('a save refused at its commit does not hold up the one called after it', async () => {
    const dir = join(root, 'refused');
    const part = (rank: number, step: number) => {
      const model = modelAtStep(step);
      for (const p of model.parameters()) markParameterShard(p, { ranks: [0, 1], rank });
      return model;
    };
    await saveCheckpoint(dir, { model: part(0, 5), step: 5 });
    const refused = saveCheckpoint(dir, { model: part(1, 5), step: 5 }); // another part's step 5: refused
    const next = saveCheckpoint(dir, { model: part(0, 6), step: 6 });
    await expect(refused).rejects.toThrow(/another part of the model/);
    expect(generationOf(await next)).toBe(2);
  }, 10_000);
});
