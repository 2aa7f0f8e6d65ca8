// Test-only: the cases every rank of contrastive.multiprocess.test.ts runs, and the
// single-process expectations they are compared with.
import { readFileSync } from 'node:fs';
import { narrow, type Tensor, tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { Generator } from '@ddp/nn';
import { clipLoss, clipLossFullMatrix } from '../clip-loss.js';
import { ntXentLoss } from '../ntxent.js';
import { sigLipLoss } from '../siglip.js';

interface Golden {
  inputs: Record<string, { shape: number[]; data: number[] } | number>;
  outputs: Record<string, { shape: number[]; data: number[] } | Record<string, number[]>>;
}
export const golden = (name: string): Golden =>
  JSON.parse(readFileSync(new URL(`../fixtures/${name}.json`, import.meta.url), 'utf8')) as Golden;
export const arrayOf = (v: unknown): { shape: number[]; data: number[] } => v as { shape: number[]; data: number[] };

export type Kind = 'clip' | 'clip-full' | 'ntxent' | 'siglip';
export interface Case {
  name: string;
  kind: Kind;
  fixture?: string;
  /** Rows of the global batch on each rank. */
  split: number[];
  naive?: boolean;
  /** Pass no group: the loss takes the default process group (each rank still gets its rows). */
  defaultGroup?: boolean;
}

/** The cases a world of `n` ranks runs. */
export function casesFor(n: number): Case[] {
  const table: Record<number, Case[]> = {
    2: [
      { name: 'clip b8 equal', kind: 'clip', fixture: 'clip_loss_b8_d4', split: [4, 4] },
      { name: 'clip b12 equal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [6, 6] },
      { name: 'clip b12 unequal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [5, 7] },
      { name: 'clip b12 naive', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [6, 6], naive: true },
      { name: 'clip full-matrix b12 unequal', kind: 'clip-full', fixture: 'clip_loss_b12_d6', split: [5, 7] },
      { name: 'ntxent equal', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [3, 3] },
      { name: 'ntxent unequal', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [1, 5] },
      { name: 'siglip unequal', kind: 'siglip', split: [4, 6] },
      // no group passed in a world of 2: before, each rank's loss was over its own rows alone
      { name: 'clip default group', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [5, 7], defaultGroup: true },
      { name: 'ntxent default group', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [2, 4], defaultGroup: true },
      { name: 'siglip default group', kind: 'siglip', split: [4, 6], defaultGroup: true },
    ],
    3: [
      { name: 'clip b12 equal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [4, 4, 4] },
      { name: 'clip b12 unequal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [2, 4, 6] },
      { name: 'ntxent equal', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [2, 2, 2] },
      { name: 'ntxent unequal', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [3, 1, 2] },
      { name: 'siglip equal', kind: 'siglip', split: [4, 4, 4] },
    ],
    4: [
      { name: 'clip b8 equal', kind: 'clip', fixture: 'clip_loss_b8_d4', split: [2, 2, 2, 2] },
      { name: 'clip b12 equal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [3, 3, 3, 3] },
      { name: 'clip b12 unequal', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [1, 2, 4, 5] },
      { name: 'clip b12 naive', kind: 'clip', fixture: 'clip_loss_b12_d6', split: [3, 3, 3, 3], naive: true },
      { name: 'clip full-matrix b8 equal', kind: 'clip-full', fixture: 'clip_loss_b8_d4', split: [2, 2, 2, 2] },
      { name: 'ntxent unequal', kind: 'ntxent', fixture: 'ntxent_b6_d5', split: [1, 2, 1, 2] },
      { name: 'siglip unequal', kind: 'siglip', split: [1, 3, 2, 4] },
    ],
  };
  return table[n] ?? [];
}

/** Deterministic inputs for SigLIP (no golden file): N(0, 1) from a seeded generator, scale ln 10, bias −2. */
export function sigLipInputs(
  rows: number,
  dim = 6,
): { image: number[]; text: number[]; scaleLog: number; bias: number } {
  const gen = new Generator(12345);
  return {
    image: Array.from(gen.normal(rows * dim)),
    text: Array.from(gen.normal(rows * dim)),
    scaleLog: Math.log(10),
    bias: -2,
  };
}

/** The full-batch inputs of a case as leaves (what DDP's parameters upstream of the features stand for). */
export function leavesFor(c: Case): Record<string, Tensor> {
  const total = c.split.reduce((a, b) => a + b, 0);
  if (c.kind === 'siglip') {
    const v = sigLipInputs(total);
    return {
      image: tensor(v.image, [total, 6], { requiresGrad: true }),
      text: tensor(v.text, [total, 6], { requiresGrad: true }),
      scaleLog: tensor([v.scaleLog], [], { requiresGrad: true }),
      bias: tensor([v.bias], [], { requiresGrad: true }),
    };
  }
  const g = golden(c.fixture!);
  const leaves: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(g.inputs)) {
    if (typeof v === 'number') continue;
    leaves[k] = tensor(v.data, v.shape, { requiresGrad: true });
  }
  return leaves;
}

/**
 * Runs case c as group rank `rank` (no group: the whole batch in one process): this rank's rows
 * of every batch input, the loss, backward. Returns the local loss and every leaf's gradient.
 */
export async function runCase(
  c: Case,
  group?: ProcessGroup,
): Promise<{ loss: number; grads: Record<string, number[]>; leaves: Record<string, Tensor> }> {
  const leaves = leavesFor(c);
  const rank = group?.rank ?? 0;
  const offset = group ? c.split.slice(0, rank).reduce((a, b) => a + b, 0) : 0;
  const rows = group ? c.split[rank] : c.split.reduce((a, b) => a + b, 0);
  const mine = (t: Tensor) => narrow(t, 0, offset, rows);
  const lossGroupOpt = c.defaultGroup ? {} : { group };
  const opts = { ...lossGroupOpt, naiveGather: c.naive };
  let loss: Tensor;
  if (c.kind === 'clip' || c.kind === 'clip-full') {
    const [img, txt] = [mine(leaves.image_features), mine(leaves.text_features)];
    loss = await (c.kind === 'clip' ? clipLoss : clipLossFullMatrix)(img, txt, leaves.logit_scale_log, opts);
    img.dispose();
    txt.dispose();
  } else if (c.kind === 'ntxent') {
    const [z1, z2] = [mine(leaves.z1), mine(leaves.z2)];
    loss = await ntXentLoss(z1, z2, { ...opts, tau: golden(c.fixture!).inputs.tau as number });
    z1.dispose();
    z2.dispose();
  } else {
    const [img, txt] = [mine(leaves.image), mine(leaves.text)];
    loss = await sigLipLoss(img, txt, leaves.scaleLog, leaves.bias, lossGroupOpt);
    img.dispose();
    txt.dispose();
  }
  await loss.backward();
  const value = loss.item();
  loss.dispose();
  const grads: Record<string, number[]> = {};
  for (const [k, t] of Object.entries(leaves))
    grads[k] = Array.from((t.grad?.dataSync() as Float32Array | undefined) ?? new Float32Array(t.size));
  return { loss: value, grads, leaves };
}
