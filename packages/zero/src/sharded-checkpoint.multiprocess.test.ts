import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runWorld } from '@ddp/launch/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface RankResult {
  rank: number;
  params: number[];
  maxDiff?: number;
  resumedAt?: number;
  broken?: ({ name: string; message: string; file?: string } | null)[];
  stepError?: { name: string; message: string };
}

const TIMEOUT = 110_000;
/** The one entry of a fresh checkpoint directory: generation 1, step 5. */
const ENTRY = '00000001-step-5';
const script = new URL('./test/sharded-checkpoint.child.ts', import.meta.url);
let root = '';
let ckpt = '';
let broken = '';
const SHARD_0 = 'optimizer-shard-0-of-2.safetensors';
/** Copies of the checkpoint with one bit flipped: the manifest's step 5 → 7, shard 0's Adam step 5 → 7. */
let flippedManifest = '';
let flippedShard = '';

/** Copies `ckpt` to `to` with one bit of `file` flipped: the first `pattern`'s last byte, '5' → '7'. */
async function flipStep(to: string, file: string, pattern: string): Promise<void> {
  await cp(ckpt, to, { recursive: true, verbatimSymlinks: true });
  const path = join(to, ENTRY, file);
  const bytes = await readFile(path);
  const at = bytes.indexOf(pattern) + pattern.length - 1;
  expect(bytes[at]).toBe(0x35);
  bytes[at] ^= 0x02;
  await writeFile(path, bytes);
}

// 5 steps of ZeRO-1 Adam on 2 ranks, saved sharded; every resume then runs steps 5..9
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'zero-sharded-'));
  ckpt = join(root, 'ckpt');
  broken = join(root, 'broken');
  await runWorld<RankResult>({
    script,
    nprocs: 2,
    args: ['--from', '0', '--to', '5', '--save', ckpt],
    timeoutMs: 60_000,
  });
  await cp(ckpt, broken, { recursive: true, verbatimSymlinks: true });
  await rm(join(broken, ENTRY, 'optimizer-shard-1-of-2.safetensors'));
  flippedManifest = join(root, 'flipped-manifest');
  flippedShard = join(root, 'flipped-shard');
  await flipStep(flippedManifest, 'manifest.json', '"step": 5');
  await flipStep(flippedShard, SHARD_0, '\\"step\\":5');
}, TIMEOUT);

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('sharded ZeRO checkpoints', () => {
  it('writes one shard per rank and a manifest naming them, in an entry that `latest` points at', async () => {
    expect((await readdir(ckpt)).sort()).toEqual([ENTRY, 'latest']);
    const files = (await readdir(join(ckpt, 'latest'))).sort();
    expect(files).toEqual([
      'manifest.json',
      'model.safetensors',
      'optimizer-shard-0-of-2.safetensors',
      'optimizer-shard-1-of-2.safetensors',
    ]);
    const manifest = JSON.parse(await readFile(join(ckpt, ENTRY, 'manifest.json'), 'utf8'));
    expect(manifest.worldSize).toBe(2);
    expect(manifest.step).toBe(5);
    expect(manifest.extra).toEqual({ note: 'test' });
    expect(manifest.parameters.map((p: { name: string }) => p.name)).toEqual([
      '0.weight',
      '0.bias',
      '2.weight',
      '2.bias',
      '4.weight',
      '4.bias',
    ]);
    expect(new Set(manifest.parameters.map((p: { shard: number }) => p.shard))).toEqual(new Set([0, 1]));
  });

  it.each([2, 3, 1])(
    'resumes on %i ranks and matches an uninterrupted 10-step run',
    async (nprocs) => {
      const args = ['--load', ckpt, '--to', '10'];
      if (nprocs === 3) args.push('--broken', broken, '--broken', flippedManifest, '--broken', flippedShard);
      const { results } = await runWorld<RankResult>({ script, nprocs, args, timeoutMs: 90_000 });
      for (const r of results) {
        expect(r.resumedAt).toBe(5);
        expect(r.maxDiff).toBeLessThan(1e-6);
        expect(r.params).toEqual(results[0].params);
      }
      if (nprocs === 3) {
        // the damaged copy: a typed error naming the missing shard, on every rank
        // and the flipped bits (was: loaded, the step counts changed): errors naming the file
        for (const r of results) {
          const [missing, manifest, shard] = r.broken ?? [];
          expect(missing?.name).toBe('ShardedCheckpointError');
          expect(missing?.message).toContain('optimizer-shard-1-of-2.safetensors');
          expect(missing?.file).toBe(join(broken, ENTRY, 'optimizer-shard-1-of-2.safetensors'));
          expect(manifest?.name).toBe('ShardedCheckpointError');
          expect(manifest?.message).toContain(`${join(flippedManifest, ENTRY, 'manifest.json')} fails its checksum`);
          // only the ranks whose parameters shard 0 holds read it
          if (shard !== null) {
            expect(shard?.name).toBe('SafetensorsError');
            expect(shard?.message).toContain(`${join(flippedShard, ENTRY, SHARD_0)}: the metadata fails its checksum`);
          }
        }
        expect(results.some((r) => r.broken?.[2] !== null)).toBe(true);
      }
    },
    TIMEOUT,
  );
});

// before, each rank trained on from the entry it had resolved, silently (probe AO: a save committed
// between two ranks' loads); a copy of the same save is the same state
it(
  "the first step after a load refuses ranks that loaded different saves, on every rank; a copy's is the same",
  async () => {
    const later = join(root, 'later');
    const copy = join(root, 'copy');
    await runWorld<RankResult>({ script, nprocs: 2, args: ['--to', '6', '--save', later], timeoutMs: 60_000 });
    await cp(ckpt, copy, { recursive: true, verbatimSymlinks: true });
    const loadEach = async (...dirs: string[]) =>
      (await runWorld<RankResult>({ script, nprocs: 2, args: dirs.flatMap((d) => ['--load-by-rank', d]) })).results;
    for (const r of await loadEach(ckpt, later)) {
      expect(r.stepError?.name).toBe('ZeroError');
      const mine = join([ckpt, later][r.rank], r.rank === 0 ? ENTRY : '00000001-step-6');
      expect(r.stepError?.message).toContain(`rank ${r.rank}: ranks 0 and 1 loaded different checkpoint entries`);
      expect(r.stepError?.message).toContain(`(this rank: ${mine})`);
    }
    for (const r of await loadEach(ckpt, copy)) expect(r.stepError).toBeUndefined();
  },
  TIMEOUT,
);

describe("sharded ZeRO checkpoints keep each rank's generator", () => {
  // only rank 0's was saved: every rank resumed with rank 0's stream (dropout masks of rank 0 on all)
  it(
    'resumed on the world size saved: each rank its own; on another: refused, unless all shared one',
    async () => {
      const generators = new URL('./test/generators.child.ts', import.meta.url);
      const run = async (nprocs: number, ...args: string[]) =>
        (await runWorld<{ rank: number; result: unknown }>({ script: generators, nprocs, args, timeoutMs: 60_000 }))
          .results;
      const own = join(root, 'generators-own');
      const shared = join(root, 'generators-shared');
      const saved = await run(2, 'save', own, 'own');
      const [sharedState] = (await run(2, 'save', shared, 'shared')).map((r) => r.result);
      expect((await run(2, 'load', own)).map((r) => r.result)).toEqual(saved.map((r) => r.result));
      expect(saved[0].result).not.toEqual(saved[1].result);
      for (const r of await run(3, 'load', own))
        expect(r.result).toMatch(/^ShardedCheckpointError: .*each of the 2 ranks saved a generator state of its own/);
      for (const r of await run(3, 'load', shared)) expect(r.result).toEqual(sharedState);
    },
    TIMEOUT,
  );
});
