// Test-only: the tiny transformer, data and single-process reference shared by the tests and the rank script.
import { crossEntropy, tidy } from '@ddp/autograd';
import { Embedding, Generator, LayerNorm, Linear, Sequential, SGD, TransformerBlock } from '@ddp/nn';
import { type MicroBatch, type PipelineParts, PipelineStage } from '../index.js';

export const CFG = {
  vocab: 11,
  seq: 6,
  dim: 8,
  heads: 2,
  layers: 4,
  microBatch: 2,
  numMicroBatches: 4,
  steps: 10,
  lr: 0.1,
  momentum: 0.9,
  seed: 4321,
};

/** The whole model, drawn from one seeded generator so every rank builds the same weights. */
export function buildParts(reduction: 'mean' | 'sum' = 'mean'): PipelineParts {
  const generator = new Generator(CFG.seed);
  const { vocab, dim, heads } = CFG;
  return {
    embedding: new Embedding(vocab, dim, { generator }),
    layers: [...Array(CFG.layers).keys()].map(() => new TransformerBlock(dim, heads, { mlpRatio: 2, generator })),
    head: new Sequential(new LayerNorm(dim), new Linear(dim, vocab, { generator })),
    lossFn: (out, target) => crossEntropy(out.reshape([-1, vocab]), target, { reduction }),
  };
}

export const makeOptimizer = (stage: PipelineStage) =>
  new SGD(stage.parameters(), { lr: CFG.lr, momentum: CFG.momentum });

/** Row r of step s's global batch: a pseudo-random sequence whose target is each token's successor rule. */
function row(step: number, r: number): { input: number[]; target: number[] } {
  let x = (step * 131 + r * 37 + 7) % 9973;
  const input: number[] = [];
  for (let t = 0; t < CFG.seq; t++) {
    x = (x * 1103 + 12345) % 9973;
    input.push(x % CFG.vocab);
  }
  return { input, target: input.map((t) => (t * 3 + 1) % CFG.vocab) };
}

/** Rows [start, start + n) of step s's global batch, as ids [n, seq] and flat targets [n·seq]. */
export function rows(step: number, start: number, n: number): { input: number[][]; target: number[] } {
  const rs = [...Array(n).keys()].map((i) => row(step, start + i));
  return { input: rs.map((r) => r.input), target: rs.flatMap((r) => r.target) };
}

/** The micro-batches of data-parallel replica `dpRank` of `dp` for one step. */
export function microBatches(step: number, dpRank: number): MicroBatch[] {
  const { microBatch: b, numMicroBatches: m } = CFG;
  return [...Array(m).keys()].map((i) => rows(step, (dpRank * m + i) * b, b));
}

export type NamedValues = Record<string, number[]>;

export function namedValues(stage: PipelineStage): NamedValues {
  return Object.fromEntries(stage.namedParameters().map(([name, p]) => [name, [...p.dataSync()]]));
}

/** Row-major micro-batches of CFG.microBatch rows each from one batch (flat targets of CFG.seq per row). */
export function split(batch: { input: number[][]; target: number[] }): MicroBatch[] {
  const { microBatch: b, seq } = CFG;
  return [...Array(batch.input.length / b).keys()].map((i) => ({
    input: batch.input.slice(i * b, (i + 1) * b),
    target: batch.target.slice(i * b * seq, (i + 1) * b * seq),
  }));
}

/** Step s's 4 rows, row 0 with only its last 2 targets (the others -100: crossEntropy's ignored padding). */
export function paddedRows(step: number): { input: number[][]; target: number[] } {
  const batch = rows(step, 0, 4);
  batch.target.fill(-100, 0, CFG.seq - 2);
  return batch;
}

/** The parameters of stage 0 of 2 (embedding, layers 0 and 1), frozen in the frozen-first-stage runs. */
export const onFirstOfTwo = (name: string) => /^(embedding|layers\.[01])\./.test(name);

export function freeze(stage: PipelineStage, which: (name: string) => boolean): void {
  for (const [name, p] of stage.namedParameters()) if (which(name)) p.requiresGrad = false;
}

/** Trains `model` (a 1-stage PipelineStage) on each step's whole batch; it is disposed after. */
export async function wholeBatchRun(
  model: PipelineStage,
  batchOf: (step: number) => { input: number[][]; target: number[] },
  steps: number,
): Promise<{ initial: NamedValues; params: NamedValues; losses: number[] }> {
  const initial = namedValues(model);
  const opt = makeOptimizer(model);
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    const { input, target } = batchOf(step);
    const loss = tidy(() => model.loss(model.forward(input), target));
    await loss.backward();
    losses.push(loss.item());
    loss.dispose();
    opt.step();
    opt.zeroGrad();
  }
  const params = namedValues(model);
  opt.dispose();
  model.dispose();
  return { initial, params, losses };
}

/** Trains the unsplit model on each step's whole global batch (dp replicas' rows together). */
export const referenceRun = (dp: number, steps: number = CFG.steps) =>
  wholeBatchRun(
    new PipelineStage(buildParts(), 0, 1),
    (s) => rows(s, 0, dp * CFG.numMicroBatches * CFG.microBatch),
    steps,
  );
