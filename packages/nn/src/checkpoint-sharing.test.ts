import { execFileSync, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { latestCheckpoint, loadCheckpoint, META_FILE, saveCheckpoint } from './checkpoint.js';
import { cleanCheckpointDir } from './checkpoint-dir.js';
import { refuseOtherFormat } from './commit-refusals.js';
import { Generator } from './generator.js';
import { HOST } from './process-owner.js';
import { sealJson } from './sealed-json.js';
import { Toy } from './test/checkpoint-toy.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ddp-nn-sharing-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Root with util-linux's unshare: a PID namespace of our own can be made. */
const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['-p', '-f', 'true']).status === 0;
if (!canUnshare) console.log('checkpoint-sharing: the PID namespace test needs root and unshare; skipped');

/** A pid no process has: past the kernel's pid_max. */
const DEAD_PID = 4_194_304 + 7;

describe('a checkpoint directory that other processes, runs or namespaces share', () => {
  it("a save that expects another newest entry is refused: a second run's commit deleted the first's", async () => {
    const [a, b] = [new Toy(new Generator(1)), new Toy(new Generator(2))];
    const first = await saveCheckpoint(dir, { model: a, step: 3 }, { expectNewest: null });
    // before: both runs committed, and run b's clean-up removed run a's step 3 (rc 0 for both)
    await expect(saveCheckpoint(dir, { model: b, step: 3 }, { expectNewest: null })).rejects.toThrow(
      /the newest checkpoint there is .*00000001-step-3, not none as this run expects: another run saves/,
    );
    const second = await saveCheckpoint(dir, { model: a, step: 6 }, { expectNewest: first });
    expect(await latestCheckpoint(dir)).toBe(second);
  });

  it.skipIf(!canUnshare)('a process in another PID namespace (a container) names its entries apart from ours', () => {
    // before: both named them `<host>-<pid>`, so a loader here took a live writer's pid there for a dead one
    const owner = fileURLToPath(new URL('./process-owner.ts', import.meta.url));
    const script = `import(${JSON.stringify(owner)}).then((m) => console.log(m.HOST))`;
    const hostIn = (unshare: string[]) =>
      execFileSync(
        unshare[0] ?? process.execPath,
        [...unshare.slice(1), ...(unshare.length ? [process.execPath] : []), '--import', 'tsx', '-e', script],
        { encoding: 'utf8', timeout: 20_000 },
      ).trim();
    const [here, there] = [hostIn([]), hostIn(['unshare', '-p', '-f', '--mount-proc'])];
    expect(here.startsWith(hostname())).toBe(true);
    expect(there.startsWith(hostname())).toBe(true);
    expect(there).not.toBe(here);
  });

  it("temporaries: another PID namespace's kept until abandoned an hour; older versions' judged by pid", async () => {
    // the same host name, another namespace (a container): its pids mean nothing here
    const foreign = `.tmp-${hostname()}~pidns1-${DEAD_PID}-0a0b0c0d`;
    const abandoned = `.tmp-${hostname()}~pidns2-${DEAD_PID}-0a0b0c0d`; // a container restarted mid-save
    const ours = `.tmp-${HOST}-${DEAD_PID}-0a0b0c0d`;
    const older = `.tmp-${hostname()}-${DEAD_PID}-0a0b0c0d`; // written before names carried the namespace
    await saveCheckpoint(dir, { model: new Toy(new Generator(1)), step: 1 });
    for (const name of [foreign, abandoned, ours, older]) await mkdir(join(dir, name));
    await writeFile(join(dir, abandoned, 'model.safetensors'), 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    for (const path of [join(dir, abandoned, 'model.safetensors'), join(dir, abandoned)])
      await utimes(path, twoHoursAgo, twoHoursAgo);
    await cleanCheckpointDir(dir, META_FILE);
    expect((await readdir(dir)).filter((n) => n.startsWith('.tmp-'))).toEqual([foreign]);
  });

  it('a directory that cannot be listed is an error, not "no checkpoint" (a --resume started from step 0)', async () => {
    const loop = join(dir, 'loop');
    await symlink(loop, loop); // ELOOP, as EACCES or EIO: anything but "not there"
    await expect(latestCheckpoint(loop)).rejects.toThrow(/cannot list .*loop: ELOOP/);
    await writeFile(join(dir, 'file'), 'x'); // a --checkpoint-dir under a file: ENOTDIR
    await expect(latestCheckpoint(join(dir, 'file', 'ckpt'))).rejects.toThrow(/cannot list .*: ENOTDIR/);
    expect(await latestCheckpoint(join(dir, 'missing'))).toBeNull();
  });

  it('a committed save whose pointer switch fails returns its entry with a warning, not an error', async () => {
    const model = new Toy(new Generator(1));
    await mkdir(join(dir, 'latest'));
    await writeFile(join(dir, 'latest', 'keep'), 'x'); // `latest` cannot be replaced by the link
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      // before: the save raised ENOTEMPTY/EISDIR though its entry was committed (and loaded next)
      const path = await saveCheckpoint(dir, { model, step: 7 });
      await vi.waitFor(() => expect(warnings.join('\n')).toMatch(/00000001-step-7 is committed; pointing latest at/));
      expect((await loadCheckpoint(dir, { model })).path).toBe(path);
      // the older entry still goes, and no link is left behind by the failed switches
      await saveCheckpoint(dir, { model, step: 8 });
      expect((await readdir(dir)).sort()).toEqual(['00000002-step-8', 'latest']);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it("a kind sharing another's metadata file name refuses to commit over it (FSDP's save deleted a ZeRO checkpoint)", async () => {
    const zero = join(dir, '00000001-step-100');
    await mkdir(zero);
    await writeFile(join(zero, 'manifest.json'), sealJson({ format: 'ddp-zero-sharded-checkpoint', version: 2 }));
    const fsdpCheck = refuseOtherFormat('manifest.json', 'ddp-fsdp-sharded-checkpoint');
    await expect(fsdpCheck(zero)).rejects.toThrow(
      /00000001-step-100 is a ddp-zero-sharded-checkpoint, not a ddp-fsdp-sharded-checkpoint, and committing beside it/,
    );
    await expect(refuseOtherFormat('manifest.json', 'ddp-zero-sharded-checkpoint')(zero)).resolves.toBeUndefined();
    await expect(fsdpCheck(null)).resolves.toBeUndefined();
    // a damaged manifest is the loader's to report: saving past it goes on, as before
    const damaged = join(dir, '00000002-step-101');
    await mkdir(damaged);
    await writeFile(join(damaged, 'manifest.json'), '{"format": "ddp-fsdp-sharded');
    await expect(fsdpCheck(damaged)).resolves.toBeUndefined();
  });

  it("an nn load of a directory whose newest entry is ZeRO's or FSDP's says so, not that it is damaged", async () => {
    // before: "the newest checkpoint is damaged; move it out", advice that hid a valid checkpoint from its loader
    const zero = join(dir, '00000001-step-100');
    await mkdir(zero);
    await writeFile(join(zero, 'manifest.json'), sealJson({ format: 'ddp-zero-sharded-checkpoint', version: 2 }));
    const model = new Toy(new Generator(1));
    for (const attempt of [latestCheckpoint(dir), loadCheckpoint(dir, { model })]) {
      await expect(attempt).rejects.toThrow(
        /00000001-step-100 has no checkpoint.json but a manifest.json: .* holds another kind of checkpoint/,
      );
    }
  });
});
