import type { Tensor } from '@ddp/autograd';
import { Embedding, type Generator, LayerNorm, Linear, Module, ModuleList, TransformerBlock } from '@ddp/nn';

/** A layer that may have become tensor-parallel (async) after applyTensorParallel. */
type Layer<I> = Module & { forward(x: I): Tensor | Promise<Tensor> };

export interface TinyGptConfig {
  vocab: number;
  seq: number;
  dim: number;
  heads: number;
  layers: number;
}

/** Test model: token + position embeddings, causal pre-norm TransformerBlocks, final norm, LM head. */
export class TinyGpt extends Module {
  readonly wte: Layer<number[][]>;
  readonly wpe: Layer<number[][]>;
  readonly blocks: ModuleList<Layer<Tensor>>;
  readonly lnf: LayerNorm;
  readonly head: Linear;

  constructor(
    readonly config: TinyGptConfig,
    generator: Generator,
  ) {
    super();
    const { vocab, seq, dim, heads, layers } = config;
    this.wte = this.registerModule('wte', new Embedding(vocab, dim, { generator }));
    this.wpe = this.registerModule('wpe', new Embedding(seq, dim, { generator }));
    this.blocks = this.registerModule(
      'blocks',
      new ModuleList<Layer<Tensor>>([...Array(layers)].map(() => new TransformerBlock(dim, heads, { generator }))),
    );
    this.lnf = this.registerModule('lnf', new LayerNorm(dim));
    this.head = this.registerModule('head', new Linear(dim, vocab, { bias: false, generator }));
  }

  /** ids [B, T] → logits [B, T, vocab]. */
  /** Each intermediate disposed once used (an async forward cannot run in tidy): evaluation leaves nothing. */
  async forward(ids: number[][]): Promise<Tensor> {
    const t = ids[0].length;
    const [tokens, positions] = [await this.wte.forward(ids), await this.wpe.forward([[...Array(t).keys()]])];
    let x = tokens.add(positions);
    tokens.dispose();
    positions.dispose();
    for (const block of this.blocks) {
      const next = await block.forward(x);
      x.dispose();
      x = next;
    }
    const normed = this.lnf.forward(x);
    x.dispose();
    const logits = await this.head.forward(normed);
    normed.dispose();
    return logits;
  }
}
