import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeArgsFor } from '@ddp/launch/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { LATEST_LINK } from './checkpoint-dir.js';
import { HOST } from './process-owner.js';
import { modelAtStep } from './test/checkpoint-crash-model.js';

/**
 * Real crashes: a child process saves a checkpoint and SIGKILLs itself at a named point of the
 * save protocol (DDP_CHECKPOINT_CRASH_AT). Every load after it must return the newest committed
 * checkpoint, and leftovers of killed saves must be gone after the next load or save.
 */
const CHILD = fileURLToPath(new URL('./test/checkpoint-crash.child.ts', import.meta.url));
/** The points of a save in order; from 'committed' on, the new checkpoint is the one to load. */
const POINTS = ['entry-created', 'model-written', 'before-commit', 'committed', 'pointer-switched'] as const;
const COMMITTED = new Set<string>(['committed', 'pointer-switched']);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-crash-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function start(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  return spawn(process.execPath, nodeArgsFor(CHILD, args), { env: { ...process.env, ...env }, stdio: 'ignore' });
}

async function saveInChild(dir: string, step: number, crashAt: string): Promise<NodeJS.Signals | null> {
  const child = start([dir, String(step)], { DDP_CHECKPOINT_CRASH_AT: crashAt });
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  if (signal === null) throw new Error(`the save of step ${step} was to die at ${crashAt} but exited with ${code}`);
  return signal;
}

/** Loads dir into a fresh model; returns the step and whether the weights are that step's. */
async function loadStep(dir: string): Promise<{ step: number; weightsMatch: boolean }> {
  const model = modelAtStep(-1);
  const { step } = await loadCheckpoint(dir, { model });
  const expected = modelAtStep(step);
  const values = (t: { dataSync(): ArrayLike<number> } | undefined) => String(t?.dataSync());
  const weightsMatch = [...model.stateDict()].every(([k, t]) => values(t) === values(expected.stateDict().get(k)));
  model.dispose();
  expected.dispose();
  return { step, weightsMatch };
}

/** What a clean checkpoint directory holds: the pointer and the one entry it names, nothing beside it. */
async function expectClean(dir: string, step: number): Promise<void> {
  const entry = (await latestCheckpoint(dir)) as string;
  expect(entry).toMatch(new RegExp(`-step-${step}$`));
  expect((await readdir(dir)).sort()).toEqual([entry.slice(dir.length + 1), LATEST_LINK].sort());
  expect(await readlink(join(dir, LATEST_LINK))).toBe(entry.slice(dir.length + 1));
}

describe('checkpoints under SIGKILL mid-save', () => {
  it('every crash point, twice: load returns the newest committed step, and cleans what the kill left', async () => {
    const dir = join(root, 'points');
    let step = 0;
    for (const point of [...POINTS, ...POINTS]) {
      step += 1;
      const acknowledged = step;
      const model = modelAtStep(acknowledged);
      await saveCheckpoint(dir, { model, step: acknowledged });
      model.dispose();
      step += 1;
      expect(await saveInChild(dir, step, point), point).toBe('SIGKILL');
      const want = COMMITTED.has(point) ? step : acknowledged;
      expect(await loadStep(dir), `killed at ${point}`).toEqual({ step: want, weightsMatch: true });
      await expectClean(dir, want);
      expect(await readdir(root), 'nothing beside the directory').toEqual(['points']);
    }
  }, 120_000);

  it('killed saves leave nothing behind after the next save; live and foreign writers are left alone', async () => {
    const dir = join(root, 'piles');
    const model = modelAtStep(1);
    await saveCheckpoint(dir, { model, step: 1 });
    for (let i = 0; i < 3; i++) await saveInChild(dir, 2 + i, 'model-written');
    // each save first removes the previous killed one's entry: one left, not three
    expect((await readdir(dir)).filter((f) => f.startsWith('.tmp-'))).toHaveLength(1);
    // a writer that is still running (its pid is alive) and one on another host
    const sleeper = spawn('sleep', ['60']);
    const live = `.tmp-${HOST}-${sleeper.pid}-0badc0de`;
    const foreign = '.tmp-another-host-1-0badc0de';
    for (const name of [live, foreign]) await mkdir(join(dir, name));
    try {
      await saveCheckpoint(dir, { model, step: 5 });
      expect((await readdir(dir)).filter((f) => f.startsWith('.tmp-')).sort()).toEqual([foreign, live].sort());
      sleeper.kill('SIGKILL');
      await once(sleeper, 'exit');
      expect((await loadCheckpoint(dir, { model })).step).toBe(5);
      expect((await readdir(dir)).filter((f) => f.startsWith('.tmp-'))).toEqual([foreign]);
    } finally {
      sleeper.kill('SIGKILL');
      model.dispose();
    }
  }, 60_000);
});
