import { readdirSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { Adam, CheckpointError, Linear, Sequential } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AsyncCheckpointer } from './checkpoint-async.js';
import { loadFSDPCheckpoint } from './checkpoint-load.js';
import { saveFSDPCheckpoint } from './checkpoint-save.js';
import { FSDPError } from './errors.js';
import { fullyShard } from './fully-shard.js';

let root = '';
beforeAll(async () => {
  await initProcessGroup({ rank: 0, worldSize: 1 });
  root = await mkdtemp(join(tmpdir(), 'fsdp-saves-'));
});
afterAll(async () => {
  await destroyProcessGroup();
  await rm(root, { recursive: true, force: true });
});

function run() {
  const model = fullyShard(new Linear(3, 2));
  return { root: model, optimizer: new Adam(model.parameters(), { lr: 0.01 }) };
}
const entries = async (dir: string) => (await readdir(dir)).filter((n) => n.includes('-step-'));

// before: two runs given one directory each committed and deleted the other's entries, silently
describe('FSDP saves with expectNewest', () => {
  it("saveFSDPCheckpoint refuses a commit over another run's newest entry", async () => {
    const dir = join(root, 'sync');
    const [a, b] = [run(), run()];
    const first = await saveFSDPCheckpoint(dir, { ...a, step: 2 }, { expectNewest: null });
    await expect(saveFSDPCheckpoint(dir, { ...b, step: 2 }, { expectNewest: null })).rejects.toThrow(CheckpointError);
    expect(await entries(dir)).toEqual([first.slice(dir.length + 1)]);
    const loaded = await loadFSDPCheckpoint(dir, b);
    expect(loaded.path).toBe(first);
    // saves issued back to back (not awaited) expect one entry: the second finds the first's, this process's own
    const [, second] = await Promise.all([
      saveFSDPCheckpoint(dir, { ...b, step: 3 }, { expectNewest: loaded.path }),
      saveFSDPCheckpoint(dir, { ...b, step: 4 }, { expectNewest: loaded.path }),
    ]);
    expect(await entries(dir)).toEqual([second.slice(dir.length + 1)]);
  });

  it("AsyncCheckpointer: saves back to back, a sync save between, another run's entry refused", async () => {
    const dir = join(root, 'async');
    const [a, b] = [run(), run()];
    const first = await saveFSDPCheckpoint(dir, { ...a, step: 1 }, { expectNewest: null });
    const saver = new AsyncCheckpointer(b.root);
    // two saves issued back to back: the second cannot know the first's entry, the checkpointer does
    const one = await saver.save(dir, { optimizer: b.optimizer, step: 2 }, { expectNewest: first });
    const two = await saver.save(dir, { optimizer: b.optimizer, step: 3 }, { expectNewest: first });
    await one.done;
    const afterTwo = await two.done;
    // a sync save, then an async one expecting it (was: the checkpointer expected its own last commit)
    const sync = await saveFSDPCheckpoint(dir, { ...b, step: 4 }, { expectNewest: afterTwo });
    const last = await (await saver.save(dir, { optimizer: b.optimizer, step: 5 }, { expectNewest: sync })).done;
    expect(await entries(dir)).toEqual([last.slice(dir.length + 1)]);
    // run a, still expecting its own entry, is refused: its clean-up would delete b's
    await expect(saveFSDPCheckpoint(dir, { ...a, step: 2 }, { expectNewest: first })).rejects.toThrow(CheckpointError);
    const other = new AsyncCheckpointer(a.root);
    const refused = await other.save(dir, { optimizer: a.optimizer, step: 2 }, { expectNewest: first });
    await expect(refused.done).rejects.toThrow(CheckpointError);
    await expect(other.wait()).rejects.toThrow(CheckpointError); // and not again by destroyProcessGroup
    expect(await entries(dir)).toEqual([last.slice(dir.length + 1)]);
  });
});

// before, every save there failed (ENOENT: the temporary entry's name was cut out of the normalised
// path, one character off), left an empty directory behind each time, and an async one's load then crashed
describe('a checkpoint directory written with a trailing slash, ./ or a doubled slash', () => {
  it.each([
    ['a trailing slash', () => `${join(root, 'trailing')}/`],
    ['./ in front', () => `./${relative(process.cwd(), join(root, 'dot'))}`],
    ['a doubled slash', () => `${root}//doubled`],
  ])('%s: sync and async saves commit and load, and leave only the entry', async (_, dir) => {
    const a = run();
    await saveFSDPCheckpoint(dir(), { ...a, step: 1 }, { expectNewest: null });
    const saver = new AsyncCheckpointer(a.root);
    const last = await (await saver.save(dir(), { optimizer: a.optimizer, step: 2 })).done;
    await saver.close();
    expect((await loadFSDPCheckpoint(dir(), run())).step).toBe(2);
    expect((await readdir(dir())).filter((n) => n !== 'latest')).toEqual([basename(last)]);
  });
});

// probe AC: saves issued every 4 steps while the writer (nice 19) got no core committed nothing for 46 steps
it('AsyncCheckpointer.save while the previous save still writes returns once that one has committed', async () => {
  const a = run();
  const saver = new AsyncCheckpointer(a.root);
  const dir = join(root, 'backlog');
  const first = await saver.save(dir, { optimizer: a.optimizer, step: 1 });
  let firstCommitted = false;
  void first.done.then(() => {
    firstCommitted = true;
  });
  const second = await saver.save(dir, { optimizer: a.optimizer, step: 2 });
  expect(firstCommitted).toBe(true);
  expect(await second.done).toMatch(/step-2$/);
  await saver.close();
});

// probe Z: pipeline stages saving one step into one directory: each commit deleted the other's entry
it("saveFSDPCheckpoint refuses a commit over the same step of another part of the model (a pipeline stage's)", async () => {
  const dir = join(root, 'stages');
  const [first, second] = [new Linear(3, 2), new Linear(2, 4)].map((m) => {
    const stage = fullyShard(m);
    return { root: stage, optimizer: new Adam(stage.parameters(), { lr: 0.01 }) };
  });
  await saveFSDPCheckpoint(dir, { ...first, step: 2 });
  await expect(saveFSDPCheckpoint(dir, { ...second, step: 2 })).rejects.toThrow(/another part of the model/);
  expect(await entries(dir)).toHaveLength(1);
});

// before: `extra` was serialised when the manifest was written, after the save's awaits
describe('FSDP saves copy `extra` at the call', () => {
  it('AsyncCheckpointer.save and an unawaited saveFSDPCheckpoint record the values of the call', async () => {
    const a = run();
    const position = { step: 1, batchInEpoch: 1, betas: [0.9, 0.99] };
    const saving = await new AsyncCheckpointer(a.root).save(join(root, 'async'), {
      optimizer: a.optimizer,
      step: 1,
      extra: position,
    });
    const sync = saveFSDPCheckpoint(join(root, 'sync'), { ...a, step: 1, extra: position });
    position.step = 2;
    position.batchInEpoch = 2;
    position.betas[1] = 0.5;
    await Promise.all([saving.done, sync]);
    for (const dir of ['async', 'sync']) {
      const loaded = await loadFSDPCheckpoint(join(root, dir), run());
      expect(loaded.extra).toEqual({ step: 1, batchInEpoch: 1, betas: [0.9, 0.99] });
    }
  });

  it('refuses an `extra` JSON would change at the call, before anything is written', async () => {
    const a = run();
    const dir = join(root, 'refused');
    await expect(saveFSDPCheckpoint(dir, { ...a, step: 1, extra: { loss: Number.NaN } })).rejects.toThrow(
      CheckpointError,
    );
    // a hyperparameter JSON would change (was: the manifest's copy made eps null, silently)
    const model = fullyShard(new Linear(3, 2));
    const optimizer = new Adam(model.parameters(), { lr: 0.01, eps: Number.POSITIVE_INFINITY });
    await expect(saveFSDPCheckpoint(dir, { root: model, optimizer, step: 1 })).rejects.toThrow(CheckpointError);
    await expect(readdir(dir)).rejects.toThrow(/ENOENT/);
  });
});

// before: each checkpointer's writer thread lived as long as the process (a program making one per run kept them all)
describe('AsyncCheckpointer.close', () => {
  // the process's OS threads by id: libuv or V8 may start one of their own meanwhile, so count the writer's only
  const threadIds = () => new Set(readdirSync('/proc/self/task'));

  it('ends the writer thread once the save in flight is done; later saves raise', async () => {
    const a = run();
    const warm = new AsyncCheckpointer(a.root); // the first save starts libuv's pool: look after it
    await (await warm.save(join(root, 'close-warm'), { optimizer: a.optimizer, step: 1 })).done;
    await warm.close();
    const before = threadIds();
    const saver = new AsyncCheckpointer(a.root);
    const saving = await saver.save(join(root, 'close'), { optimizer: a.optimizer, step: 1 });
    const started = [...threadIds()].filter((id) => !before.has(id)); // the writer's, and any other newcomer
    expect(started.length).toBeGreaterThan(0);
    await saver.close(); // waits for the save
    await expect(saving.done).resolves.toMatch(/-step-1$/);
    const after = threadIds();
    expect(started.filter((id) => after.has(id)).length).toBeLessThan(started.length);
    await expect(saver.save(join(root, 'close'), { optimizer: a.optimizer, step: 2 })).rejects.toThrow(FSDPError);
  });
});

// before: the shards and the replicated state were written, then the optimizer's groups refused
describe('a refused loadFSDPCheckpoint', () => {
  it('leaves the model as it was (an optimizer of other groups)', async () => {
    const twoUnits = () => {
      const model = new Sequential(new Linear(3, 2), new Linear(2, 2));
      for (const i of [0, 1]) fullyShard(model.at(i));
      return fullyShard(model);
    };
    const saved = twoUnits();
    const [first, second] = saved.parameters();
    const groups = new Adam([{ params: [first] }, { params: [second] }], { lr: 0.1 });
    const dir = join(root, 'refused-load');
    await saveFSDPCheckpoint(dir, { root: saved, optimizer: groups, step: 1 });
    const target = twoUnits();
    for (const p of target.parameters()) p.data = tf.fill(p.shape, 0.5);
    const oneGroup = new Adam(target.parameters(), { lr: 0.1 });
    await expect(loadFSDPCheckpoint(dir, { root: target, optimizer: oneGroup })).rejects.toThrow(
      /holds the shards of parameters \[1\.0,1\.1,2\.0,2\.1\] \(unit\.parameter\), the checkpoint.s \[1\.0\]/,
    );
    // was: the checkpoint's shards already in the model, the optimizer's state not
    for (const p of target.parameters()) expect(Array.from(p.data.dataSync()).every((v) => v === 0.5)).toBe(true);
  });
});
