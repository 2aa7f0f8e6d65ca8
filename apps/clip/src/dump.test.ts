import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdamW, Generator, loadSafetensors, WarmupCosineLR } from '@ddp/nn';
import { afterAll, describe, expect, it } from 'vitest';
import { GlobalBatchSampler } from './batches.js';
import { DigitPairs } from './data.js';
import { type DumpedRun, dumpRun } from './dump.js';
import { ClipModel } from './model.js';

const dir = mkdtempSync(join(tmpdir(), 'clip-dump-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A small MNIST stand-in: 11 images (so 2 global batches of 5 per epoch), labels i mod 10. */
const fakeMnist = (count: number) => ({
  images: Uint8Array.from({ length: count * 784 }, (_, i) => i % 251),
  labels: Uint8Array.from({ length: count }, (_, i) => i % 10),
  count,
  rows: 28,
  cols: 28,
});

describe('dumpRun (--dump-init)', () => {
  it('writes the weights, the batches of every rank, the test pairs and the optimizer groups by name', async () => {
    const model = new ClipModel({ generator: new Generator(4) });
    const params = model.parameters();
    const optimizer = new AdamW(
      [
        { params: params.filter((p) => p.rank >= 2), weightDecay: 0.1 },
        { params: params.filter((p) => p.rank < 2), weightDecay: 0 },
      ],
      { lr: 1e-3, betas: [0.9, 0.98], eps: 1e-6 },
    );
    const scheduler = new WarmupCosineLR(optimizer, { warmupSteps: 1, totalSteps: 5, minLr: 5e-5 });
    const train = new DigitPairs(fakeMnist(11));
    const test = new DigitPairs(fakeMnist(7));
    const run = {
      world: 2,
      steps: 5,
      gradAccum: 1,
      batchSize: 5,
      seed: 3,
      evalEvery: 0,
      evalSize: 6,
      checkpointEvery: 0,
    };
    await dumpRun(dir, { model, optimizer, scheduler, train, test, run });

    const weights = (await loadSafetensors(join(dir, 'init.safetensors'))).tensors;
    const state = model.stateDict();
    expect([...weights.keys()]).toEqual([...state.keys()]);
    for (const [name, t] of state) expect([...weights.get(name)!.data], name).toEqual([...t.dataSync()]);

    const data = (await loadSafetensors(join(dir, 'data.safetensors'))).tensors;
    const pairs = data.get('train_pairs')!;
    /** [left, right] image of row k of global batch u. */
    const pair = (u: number, k: number) => [pairs.data[(u * 5 + k) * 2], pairs.data[(u * 5 + k) * 2 + 1]];
    const digitsOf = (split: DigitPairs, [l, r]: number[]) => [split.mnist.labels[l], split.mnist.labels[r]];
    expect(pairs.shape).toEqual([5, 5, 2]);
    // steps 0–4 cross two epoch boundaries; rank r's share of step u is rows r, r+2, … of the global batch
    for (let u = 0; u < 5; u++) {
      for (let rank = 0; rank < 2; rank++) {
        const sampler = new GlobalBatchSampler(11, 5, rank, 2, 3);
        const rows = [...Array(5).keys()].filter((k) => k % 2 === rank).map((k) => pair(u, k));
        const left = sampler.indices(u);
        expect(
          rows.map(([l]) => l),
          `step ${u} rank ${rank}`,
        ).toEqual(left);
        // the right image carries the caption's second digit
        expect(rows.map((p) => digitsOf(train, p))).toEqual(left.map((i) => train.digits(i)));
      }
    }
    const testPairs = data.get('test_pairs')!;
    expect(testPairs.shape).toEqual([6, 2]);
    const testDigits = [...Array(6).keys()].map((i) => digitsOf(test, [...testPairs.data.slice(2 * i, 2 * i + 2)]));
    expect(testDigits).toEqual([...Array(6).keys()].map((i) => test.digits(i)));
    expect([...data.get('caption_tokens')!.data.slice(2 * 37, 2 * 37 + 2)]).toEqual([3, 7]);

    const dumped = JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as DumpedRun;
    const byName = new Map(model.namedParameters());
    const groupParams = dumped.optimizer.map((g) => g.params.map((n) => byName.get(n)));
    expect(groupParams).toEqual(optimizer.paramGroups.map((g) => g.params));
    expect(dumped.optimizer.map((g) => [g.lr, g.weightDecay, g.eps, g.betas])).toEqual([
      [1e-3, 0.1, 1e-6, [0.9, 0.98]],
      [1e-3, 0, 1e-6, [0.9, 0.98]],
    ]);
    expect(dumped).toMatchObject({ ...run, maxLogitScale: 100 });
    expect(dumped.schedule).toEqual({ warmupSteps: 1, totalSteps: 5, minLr: 5e-5 });
    model.dispose();
    optimizer.dispose();
  });
});
