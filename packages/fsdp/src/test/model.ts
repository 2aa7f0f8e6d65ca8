// Test-only models and data for the FSDP rank scripts.
import { readFileSync } from 'node:fs';
import { type Tensor, tensor } from '@ddp/autograd';
import { Generator, LayerNorm, Linear, Module, Sequential, Tanh, TransformerBlock } from '@ddp/nn';
import { tf } from '@ddp/tensor';

interface GoldenTensor {
  shape: number[];
  data: number[];
}
export interface MlpGolden {
  inputs: Record<'W1' | 'b1' | 'W2' | 'b2' | 'X' | 'Y', GoldenTensor>;
  outputs: { weights_after_step: Record<'W1' | 'b1' | 'W2' | 'b2', GoldenTensor>[] };
}
export const loadGolden = (): MlpGolden =>
  JSON.parse(readFileSync(new URL('../fixtures/mlp_sgd_3steps.json', import.meta.url), 'utf8')) as MlpGolden;
export const MLP_KEYS = { W1: '0.weight', b1: '0.bias', W2: '2.weight', b2: '2.bias' } as const;

/** PyTorch's golden MLP: Linear(5, 8), Tanh, Linear(8, 3) with the fixture's initial weights. */
export function goldenMlp(g: MlpGolden): Sequential {
  const model = new Sequential(new Linear(5, 8), new Tanh(), new Linear(8, 3));
  const state = new Map(
    Object.entries(MLP_KEYS).map(([gk, key]) => {
      const t = g.inputs[gk as keyof typeof MLP_KEYS];
      return [key, tf.tensor(t.data, t.shape)];
    }),
  );
  model.loadStateDict(state);
  tf.dispose([...state.values()]);
  return model;
}

/** Rows [from, to) of the golden batch of step t. */
export function goldenBatch(t: number, from: number, to: number): { x: Tensor; y: Tensor } {
  const { X, Y } = loadGolden().inputs;
  const rowsOf = (g: GoldenTensor) => {
    const [, n, w] = g.shape as [number, number, number];
    return tensor(g.data.slice((t * n + from) * w, (t * n + to) * w), [to - from, w]);
  };
  return { x: rowsOf(X), y: rowsOf(Y) };
}

/** Linear(6, 7), Tanh, Linear(7, 5): 49 and 40 elements, which 2, 3 and 4 do not all divide. */
export function unevenMlp(): Sequential {
  const gen = new Generator(3);
  return new Sequential(new Linear(6, 7, { generator: gen }), new Tanh(), new Linear(7, 5, { generator: gen }));
}

/** An input projection, two TransformerBlocks and a head under a root that is not a Sequential. */
export class TwoBlockTransformer extends Module {
  readonly inProj: Linear;
  readonly blocks: [TransformerBlock, TransformerBlock];
  readonly norm: LayerNorm;
  readonly head: Linear;
  /** A second head in the root's unit, added to the output only when `useSide` (a branch the loss may skip). */
  readonly side: Linear;
  /** Leaves block1 out of the forward (a layer some micro-batches skip). */
  skipBlock1 = false;
  useSide = false;
  constructor() {
    super();
    const gen = new Generator(11);
    this.inProj = this.registerModule('inProj', new Linear(6, 16, { generator: gen }));
    this.blocks = [
      this.registerModule('block0', new TransformerBlock(16, 2, { generator: gen })),
      this.registerModule('block1', new TransformerBlock(16, 2, { generator: gen })),
    ];
    this.norm = this.registerModule('norm', new LayerNorm(16));
    this.head = this.registerModule('head', new Linear(16, 5, { generator: gen }));
    this.side = this.registerModule('side', new Linear(16, 5, { generator: gen }));
    // the key bias's exact gradient is 0 (softmax ignores a per-query shift): its float noise,
    // which Adam scales to steps of size lr, differs between any two summation orders
    for (const [name, p] of this.namedParameters()) if (name.endsWith('in_proj_bias')) p.requiresGrad_(false);
  }
  forward(x: Tensor): Tensor {
    let h = this.inProj.forward(x);
    for (const b of this.skipBlock1 ? [this.blocks[0]] : this.blocks) h = b.forward(h);
    const normed = this.norm.forward(h);
    const out = this.head.forward(normed);
    return this.useSide ? out.add(this.side.forward(normed)) : out;
  }
}

/** The rows [from, to) of step t's global batch (12 rows, `width` features; sequences of 3 for the transformer). */
export function batch(
  t: number,
  width: number,
  outWidth: number,
  seq: boolean,
  from: number,
  to: number,
): { x: Tensor; y: Tensor } {
  const gen = new Generator(1000 + 97 * t);
  const xs = gen.normal(12 * (seq ? 3 : 1) * width);
  const ys = gen.normal(12 * (seq ? 3 : 1) * outWidth, 0, 0.5);
  const per = seq ? 3 : 1;
  const x = tensor(xs.slice(from * per * width, to * per * width), seq ? [to - from, 3, width] : [to - from, width]);
  const y = tensor(
    ys.slice(from * per * outWidth, to * per * outWidth),
    seq ? [to - from, 3, outWidth] : [to - from, outWidth],
  );
  return { x, y };
}

export function flatValues(params: readonly Tensor[]): number[] {
  return params.flatMap((p) => [...(p.data.dataSync() as Float32Array)]);
}
