// Test-only models, data and helpers shared by the rank scenarios.
import { readFileSync } from 'node:fs';
import { fromTf, type Tensor } from '@ddp/autograd';
import { Embedding, Generator, Linear, Module, Sequential, Tanh, TransformerBlock } from '@ddp/nn';
import { tf } from '@ddp/tensor';

export interface GoldenTensor {
  shape: number[];
  data: number[];
}
export interface MlpGolden {
  inputs: Record<'W1' | 'b1' | 'W2' | 'b2' | 'X' | 'Y', GoldenTensor>;
  outputs: { weights_after_step: Record<'W1' | 'b1' | 'W2' | 'b2', GoldenTensor>[] };
}

export const loadGolden = (): MlpGolden =>
  JSON.parse(readFileSync(new URL('../fixtures/mlp_sgd_3steps.json', import.meta.url), 'utf8')) as MlpGolden;

/** Golden name → state-dict key of the Sequential MLP. */
export const MLP_KEYS = { W1: '0.weight', b1: '0.bias', W2: '2.weight', b2: '2.bias' } as const;

export function goldenMlp(g: MlpGolden): Sequential {
  const model = new Sequential(new Linear(5, 8), new Tanh(), new Linear(8, 3));
  const state = new Map(
    Object.entries(MLP_KEYS).map(([gk, key]) => [
      key,
      tf.tensor(g.inputs[gk as keyof typeof MLP_KEYS].data, g.inputs[gk as keyof typeof MLP_KEYS].shape),
    ]),
  );
  model.loadStateDict(state);
  for (const t of state.values()) t.dispose();
  return model;
}

export function mlp(seed: number, sizes = [5, 8, 3]): Sequential {
  const gen = new Generator(seed);
  return new Sequential(
    new Linear(sizes[0], sizes[1], { generator: gen }),
    new Tanh(),
    new Linear(sizes[1], sizes[2], { generator: gen }),
  );
}

/**
 * Two TransformerBlocks and a head. The attention in-projection biases are frozen: the key
 * bias's exact gradient is 0 (softmax ignores a per-query shift), so its float noise, which
 * Adam normalises to steps of size lr, would differ between any two summation orders. Frozen
 * parameters also check that DDP leaves requiresGrad = false parameters alone.
 */
export function transformer(seed: number): Sequential {
  const gen = new Generator(seed);
  const model = new Sequential(
    new TransformerBlock(16, 2, { generator: gen }),
    new TransformerBlock(16, 2, { generator: gen }),
    new Linear(16, 4, { generator: gen }),
  );
  for (const [name, p] of model.namedParameters()) if (name.endsWith('in_proj_bias')) p.requiresGrad_(false);
  return model;
}

/** Logits from an embedding table reused as the output projection (tied weights). */
export class TiedLM extends Module {
  readonly emb: Embedding;
  readonly mid: Linear;
  constructor(seed: number) {
    super();
    const gen = new Generator(seed);
    this.emb = this.registerModule('emb', new Embedding(10, 8, { generator: gen }));
    this.mid = this.registerModule('mid', new Linear(8, 8, { generator: gen }));
  }
  forward(ids: number[]): Tensor {
    return this.mid.forward(this.emb.forward(ids)).tanh().matmul(this.emb.weight, { transposeB: true });
  }
}

/** A reproducible normal tensor (the same on every rank). */
export function normal(shape: number[], seed: number): tf.Tensor {
  const gen = new Generator(seed);
  return tf.tensor(gen.normal(shape.reduce((a, b) => a * b, 1)), shape);
}

/** Rows [from, to) of a [rows, ...] tf tensor, as an autograd Tensor. */
export function rows(t: tf.Tensor, from: number, to: number): Tensor {
  return fromTf(tf.slice(t, [from], [to - from]));
}

/** Rank r's share [r·n/N, (r+1)·n/N) of n rows. */
export const shareOf = (n: number, rank: number, world: number): [number, number] => [
  (rank * n) / world,
  ((rank + 1) * n) / world,
];

export function snapshot(model: Module): Record<string, number[]> {
  return Object.fromEntries(model.namedParameters().map(([n, p]) => [n, [...p.dataSync()]]));
}

export function gradSnapshot(model: Module): Record<string, number[] | null> {
  return Object.fromEntries(
    model.namedParameters().map(([n, p]) => [n, p.grad ? [...(p.grad.dataSync() as Float32Array)] : null]),
  );
}
