import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tf } from '@ddp/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestCheckpoint, loadCheckpoint, META_FILE, OPTIMIZER_FILE, saveCheckpoint } from './checkpoint.js';
import { CheckpointError } from './checkpoint-errors.js';
import { Linear } from './layers/linear.js';
import { Adam } from './optim/adam.js';
import { SafetensorsError } from './safetensors.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ddp-nn-bitflip-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A model and Adam after one step: step counts, learning rate and betas are in the JSON and metadata. */
function trained() {
  const model = new Linear(3, 2);
  const optimizer = new Adam(model.parameters(), { lr: 0.001, betas: [0.9, 0.999] });
  for (const p of model.parameters()) p.grad = tf.onesLike(p.data);
  optimizer.step();
  return { model, optimizer };
}

/** Header bytes of a safetensors file: the length prefix and the JSON (tensor data has its own checksums). */
const headerLength = (bytes: Uint8Array) =>
  8 + Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));

/**
 * Flips bits of the first `span` bytes of `file`, one at a time, and loads: every flip must be a typed
 * error naming the file. Returns the flips that loaded or failed otherwise (there must be none).
 */
async function silentFlips(dir: string, file: string, span: (bytes: Uint8Array) => number) {
  const { model, optimizer } = trained();
  const original = new Uint8Array(await readFile(file));
  const loaded: string[] = [];
  try {
    for (let at = 0; at < span(original); at++) {
      for (const bit of [0x01, 0x02, 0x04, 0x10]) {
        const bytes = original.slice();
        bytes[at] ^= bit;
        await writeFile(file, bytes);
        const flip = `byte ${at} ('${String.fromCharCode(original[at])}') ^ ${bit}`;
        try {
          await loadCheckpoint(dir, { model, optimizer });
          loaded.push(`${flip}: loaded`);
        } catch (error) {
          const typed = error instanceof CheckpointError || error instanceof SafetensorsError;
          if (!typed || !(error as Error).message.includes(file)) loaded.push(`${flip}: ${error}`);
        }
      }
    }
  } finally {
    await writeFile(file, original);
    optimizer.dispose();
    model.dispose();
  }
  return loaded;
}

describe('bit flips in what a checkpoint stores beside the tensor data', () => {
  it('every single-bit flip of checkpoint.json is an error naming it (was: step, lr, betas loaded changed)', async () => {
    const dir = join(root, 'meta');
    const { model, optimizer } = trained();
    await saveCheckpoint(dir, { model, optimizer, step: 12, epoch: 3, extra: { seed: 5 } });
    optimizer.dispose();
    model.dispose();
    const file = join((await latestCheckpoint(dir)) as string, META_FILE);
    expect(await silentFlips(dir, file, (b) => b.length)).toEqual([]);
  });

  it("every single-bit flip of a safetensors file's header is an error naming it (was: metadata loaded changed)", async () => {
    const dir = join(root, 'header');
    const { model, optimizer } = trained();
    await saveCheckpoint(dir, { model, optimizer, step: 1 });
    optimizer.dispose();
    model.dispose();
    const file = join((await latestCheckpoint(dir)) as string, OPTIMIZER_FILE);
    expect(await silentFlips(dir, file, headerLength)).toEqual([]);
  });

  it('a version 1 checkpoint.json (before the checksums) loads; a version 2 one without its checksum does not', async () => {
    const dir = join(root, 'versions');
    const { model, optimizer } = trained();
    await saveCheckpoint(dir, { model, optimizer, step: 4 });
    const file = join((await latestCheckpoint(dir)) as string, META_FILE);
    const { crc32: _, ...meta } = JSON.parse(await readFile(file, 'utf8'));
    await writeFile(file, JSON.stringify({ ...meta, version: 1 }));
    expect((await loadCheckpoint(dir, { model, optimizer })).step).toBe(4);
    await writeFile(file, JSON.stringify(meta));
    await expect(loadCheckpoint(dir, { model, optimizer })).rejects.toThrow(`${file} has no checksum`);
    optimizer.dispose();
    model.dispose();
  });
});
