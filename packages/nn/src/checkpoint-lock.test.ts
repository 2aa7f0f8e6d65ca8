import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestCheckpoint, META_FILE, MODEL_FILE, saveCheckpoint } from './checkpoint.js';
import { readNewestEntry } from './checkpoint-dir.js';
import { HOST } from './process-owner.js';
import { modelAtStep } from './test/checkpoint-crash-model.js';

/** The commit lock of a checkpoint directory (checkpoint-lock.ts) and loads beside saves. */
let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-lock-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function save(dir: string, step: number): Promise<string> {
  const model = modelAtStep(step);
  try {
    return await saveCheckpoint(dir, { model, step });
  } finally {
    model.dispose();
  }
}
const locks = async (dir: string) => (await readdir(dir)).filter((n) => n.startsWith('.lock-'));
const settled = <T>(p: Promise<T>) => Promise.race([p.then(() => true), sleep(300).then(() => false)]);

describe('the commit lock of a checkpoint directory', () => {
  it('a live holder makes a save wait; its release lets it commit', async () => {
    const dir = join(root, 'live');
    await save(dir, 1);
    const holder = spawn('sleep', ['60']);
    const held = join(dir, `.lock-${HOST}-${holder.pid}-0badc0de`);
    try {
      await writeFile(held, '');
      const pending = save(dir, 2);
      expect(await settled(pending), 'committed while the lock was held').toBe(false);
      expect(basename((await latestCheckpoint(dir)) ?? '')).toBe('00000001-step-1');
      await rm(held);
      expect(basename(await pending)).toBe('00000002-step-2');
      expect(await locks(dir)).toEqual([]);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('the lock of a dead process, or an old one of another host, is stale: removed, the save goes on', async () => {
    const dir = join(root, 'stale');
    await save(dir, 1);
    const dead = spawn('true');
    await once(dead, 'exit');
    await writeFile(join(dir, `.lock-${HOST}-${dead.pid}-0badc0de`), '');
    const foreign = join(dir, '.lock-another-host-7-0badc0de');
    await writeFile(foreign, '');
    const longAgo = new Date(Date.now() - 120_000);
    await utimes(foreign, longAgo, longAgo);
    expect(basename(await save(dir, 2))).toBe('00000002-step-2');
    expect(await locks(dir)).toEqual([]);
  });

  // probe CO: a live holder stopped past 30 s had its lock broken; two commits took one generation and the
  // later acknowledged save never loaded
  it('an old lock of a live process of this host is respected, however old', async () => {
    const dir = join(root, 'old-live');
    await save(dir, 1);
    const init = join(dir, `.lock-${HOST}-1-0badc0de`); // pid 1 runs since boot: the holder, stalled
    await writeFile(init, '');
    await utimes(init, new Date(Date.now() - 120_000), new Date(Date.now() - 120_000));
    const pending = save(dir, 2);
    expect(await settled(pending), 'broke a live holder’s lock').toBe(false);
    await rm(init);
    expect(basename(await pending)).toBe('00000002-step-2');
  });

  it("stale: a lock whose pid now names another process (reused), a zombie's, this pid's from a former process", async () => {
    const dir = join(root, 'reused');
    await save(dir, 1);
    const newcomer = spawn('sleep', ['60']);
    // a zombie: sh's background child, never reaped once sh has become `sleep 60`
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60']);
    const [zombie] = (await once(parent.stdout, 'data')) as [Buffer];
    try {
      await sleep(200);
      await writeFile(join(dir, `.lock-${HOST}-${newcomer.pid}-0badc0de`), '1:1'); // recorded another start
      await writeFile(join(dir, `.lock-${HOST}-${Number(String(zombie))}-0badc0de`), '');
      await writeFile(join(dir, `.lock-${HOST}-${process.pid}-0badc0de`), ''); // not one this process holds
      expect(basename(await save(dir, 2))).toBe('00000002-step-2');
      expect(await locks(dir)).toEqual([]);
    } finally {
      newcomer.kill('SIGKILL');
      parent.kill('SIGKILL');
    }
  });

  it('a fresh lock of another host is respected', async () => {
    const dir = join(root, 'foreign');
    await save(dir, 1);
    const held = join(dir, '.lock-another-host-7-0badc0de');
    await writeFile(held, '');
    const pending = save(dir, 2);
    expect(await settled(pending)).toBe(false);
    await rm(held);
    expect(basename(await pending)).toBe('00000002-step-2');
  });
});

describe('a load beside a save', () => {
  it('reads the newer entry when a commit removed the one being read', async () => {
    const dir = join(root, 'superseded');
    await save(dir, 1);
    const read = await readNewestEntry(dir, META_FILE, async (entry) => {
      if (basename(entry) === '00000001-step-1') await save(dir, 2); // committed mid-read: entry 1 removed
      return { entry: basename(entry), bytes: (await readFile(join(entry, MODEL_FILE))).length };
    });
    expect(read?.entry).toBe('00000002-step-2');
  });

  it('a failure reading the newest entry is raised', async () => {
    const dir = join(root, 'damaged');
    await save(dir, 1);
    const entry = (await latestCheckpoint(dir)) ?? '';
    await rm(join(entry, MODEL_FILE));
    await expect(readNewestEntry(dir, META_FILE, (e) => readFile(join(e, MODEL_FILE)))).rejects.toThrow(/ENOENT/);
  });
});
