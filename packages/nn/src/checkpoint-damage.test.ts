import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileWriteError } from './atomic.js';
import { latestCheckpoint, loadCheckpoint, MODEL_FILE, OPTIMIZER_FILE, saveCheckpoint } from './checkpoint.js';
import { LATEST_LINK } from './checkpoint-dir.js';
import { CheckpointError } from './checkpoint-errors.js';
import { Linear } from './layers/linear.js';
import { SGD } from './optim/sgd.js';
import { SafetensorsError } from './safetensors.js';
import { modelAtStep } from './test/checkpoint-crash-model.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-damage-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function caught(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** Byte offset of a tensor's data in a safetensors file. */
function dataOffset(bytes: Uint8Array, name: string): number {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  return 8 + n + header[name].data_offsets[0];
}

describe('damaged checkpoints', () => {
  it('a flipped bit inside tensor data is a checksum error naming the tensor and the file', async () => {
    const dir = join(root, 'flip');
    const model = modelAtStep(1);
    await saveCheckpoint(dir, { model, step: 1 });
    const file = join((await latestCheckpoint(dir)) as string, MODEL_FILE);
    const bytes = new Uint8Array(await readFile(file));
    bytes[dataOffset(bytes, 'bias') + 5] ^= 0x04; // one bit of the bias's second value
    await writeFile(file, bytes);
    const error = await caught(loadCheckpoint(dir, { model }));
    expect(error).toBeInstanceOf(SafetensorsError);
    expect((error as SafetensorsError).kind).toBe('checksum');
    expect(error.message).toContain(file);
    expect(error.message).toContain("tensor 'bias' fails its checksum");
    model.dispose();
  });

  it('a newest entry without its checkpoint.json is a CheckpointError, not the older one or none', async () => {
    // before: skipped as incomplete, so a resumed run loaded the older entry, or (the only one) started afresh
    // and its first save removed the damaged entry's weights
    const dir = join(root, 'no-meta');
    const model = modelAtStep(1);
    await saveCheckpoint(dir, { model, step: 1 });
    await saveCheckpoint(dir, { model, step: 2 });
    await rm(join((await latestCheckpoint(dir)) as string, 'checkpoint.json'));
    for (const error of [await caught(latestCheckpoint(dir)), await caught(loadCheckpoint(dir, { model }))]) {
      expect(error).toBeInstanceOf(CheckpointError);
      expect(error.message).toMatch(/00000002-step-2 has no checkpoint.json: the newest checkpoint is damaged/);
      expect(error.message).toContain('to load nothing (no older checkpoint is there)');
    }
    model.dispose();
  });

  it('a missing file is a typed error naming it', async () => {
    const dir = join(root, 'missing');
    const model = new Linear(3, 2);
    const optimizer = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
    for (const p of model.parameters()) p.grad = tf.onesLike(p.data);
    optimizer.step();
    await saveCheckpoint(dir, { model, optimizer, step: 1 });
    const file = join((await latestCheckpoint(dir)) as string, OPTIMIZER_FILE);
    await rm(file);
    const error = await caught(loadCheckpoint(dir, { model, optimizer }));
    expect(error).toBeInstanceOf(SafetensorsError);
    expect((error as SafetensorsError).kind).toBe('missing');
    expect(error.message).toBe(`${file}: no such file`);
    optimizer.dispose();
    model.dispose();
  });

  // a 1 MiB tmpfs: the first checkpoint fits, the second (a 2.3 MB model) does not
  const isRoot = process.getuid?.() === 0;
  it.skipIf(!isRoot)(
    'a full disk: a typed error naming the file; the previous checkpoint loads; no leftovers',
    async () => {
      const mount = join(root, 'tiny');
      await mkdir(mount);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mount]);
      const small = modelAtStep(1);
      const big = new Linear(768, 768);
      try {
        const dir = join(mount, 'ckpt');
        await saveCheckpoint(dir, { model: small, step: 1 });
        const error = await caught(saveCheckpoint(dir, { model: big, step: 2 }));
        expect(error).toBeInstanceOf(FileWriteError);
        expect((error as FileWriteError).code).toBe('ENOSPC');
        expect(error.message).toMatch(new RegExp(`^cannot write ${dir}/\\.tmp-[^/]+/${MODEL_FILE}: ENOSPC`));
        expect((await loadCheckpoint(dir, { model: small })).step).toBe(1);
        expect((await readdir(dir)).filter((f) => f.startsWith('.tmp-'))).toEqual([]);
      } finally {
        execFileSync('umount', [mount]);
        small.dispose();
        big.dispose();
      }
    },
  );
  it.skipIf(!isRoot)('a checkpoint on a read-only file system loads (its clean-up is skipped)', async () => {
    const dir = join(root, 'writable');
    const model = modelAtStep(2);
    await saveCheckpoint(dir, { model, step: 2 });
    await rm(join(dir, LATEST_LINK)); // a load would point it again
    const readOnly = join(root, 'read-only');
    await mkdir(readOnly);
    execFileSync('mount', ['--bind', dir, readOnly]);
    try {
      execFileSync('mount', ['-o', 'remount,ro,bind', readOnly]);
      expect((await loadCheckpoint(readOnly, { model })).step).toBe(2);
    } finally {
      execFileSync('umount', [readOnly]);
      model.dispose();
    }
  });
  it.skipIf(!isRoot)('a save on a read-only file system says EROFS; the checkpoint there still loads', async () => {
    const dir = join(root, 'writable-2');
    const model = modelAtStep(2);
    await saveCheckpoint(dir, { model, step: 2 });
    const readOnly = join(root, 'read-only-2');
    await mkdir(readOnly);
    execFileSync('mount', ['--bind', dir, readOnly]);
    try {
      execFileSync('mount', ['-o', 'remount,ro,bind', readOnly]);
      const error = await caught(saveCheckpoint(readOnly, { model, step: 3 }));
      expect(error).toBeInstanceOf(CheckpointError);
      // was: "ENOENT: no such file or directory, mkdir …" (mkdir's recursive form), as if dir were missing
      expect(error.message).toMatch(new RegExp(`^saveCheckpoint\\(${readOnly}\\): EROFS: read-only file system`));
      expect((await loadCheckpoint(readOnly, { model })).step).toBe(2);
    } finally {
      execFileSync('umount', [readOnly]);
      model.dispose();
    }
  });
  it.skipIf(process.platform !== 'linux')(
    'a save under /proc says ENOENT at once (was: mkdir spinning forever)',
    async () => {
      const model = modelAtStep(1);
      try {
        const error = await caught(saveCheckpoint('/proc/ddp-checkpoints/run', { model, step: 1 }));
        expect(error).toBeInstanceOf(CheckpointError);
        expect(error.message).toMatch(
          /^saveCheckpoint\(\/proc\/ddp-checkpoints\/run\): ENOENT: .*mkdir '\/proc\/ddp-checkpoints'/,
        );
      } finally {
        model.dispose();
      }
    },
    10_000,
  );
  if (!isRoot) console.log('skipped the full-disk and read-only tests: mounting needs root');
});
