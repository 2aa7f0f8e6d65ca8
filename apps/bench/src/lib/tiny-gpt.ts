import { crossEntropy, type Tensor, tidy } from '@ddp/autograd';
import { AdamW, Embedding, LayerNorm, Linear, Module, TransformerBlock } from '@ddp/nn';
import { timeIt } from './kernel-cases.js';

/** GPT-style: token + position embeddings, pre-norm causal blocks, final norm, LM head. */
class TinyGPT extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: TransformerBlock[];
  readonly norm: LayerNorm;
  readonly head: Linear;
  constructor(
    readonly vocab: number,
    readonly seq: number,
    dim: number,
    heads: number,
    layers: number,
  ) {
    super();
    this.tok = this.registerModule('tok', new Embedding(vocab, dim));
    this.pos = this.registerModule('pos', new Embedding(seq, dim));
    this.blocks = [...Array(layers).keys()].map((i) =>
      this.registerModule(`block${i}`, new TransformerBlock(dim, heads)),
    );
    this.norm = this.registerModule('norm', new LayerNorm(dim));
    this.head = this.registerModule('head', new Linear(dim, vocab, { bias: false }));
  }
  forward(ids: number[][]): Tensor {
    const positions = [...Array(this.seq).keys()];
    let x = this.tok.forward(ids).add(this.pos.forward(positions));
    for (const block of this.blocks) x = block.forward(x);
    return this.head.forward(this.norm.forward(x));
  }
}

/** The step `pnpm bench kernels` times: a small causal transformer's shape and batch. */
export const STEP = { batch: 8, seq: 32, dim: 64, heads: 4, layers: 2, vocab: 64 };

/** One training step (forward, cross-entropy, backward, AdamW), timed for at least minSeconds. */
export async function transformerStep(minSeconds: number): Promise<{ msPerStep: number; tokensPerSecond: number }> {
  const { batch, seq, dim, heads, layers, vocab } = STEP;
  const model = new TinyGPT(vocab, seq, dim, heads, layers);
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
  const ids = [...Array(batch).keys()].map((b) => [...Array(seq).keys()].map((t) => (b * 7 + t * 3) % vocab));
  const targets = ids.flatMap((row) => row.map((t) => (t + 1) % vocab));
  const seconds = await timeIt(async () => {
    const loss = tidy(() => crossEntropy(model.forward(ids).reshape([batch * seq, vocab]), targets));
    await loss.backward();
    loss.dispose();
    optimizer.step();
    optimizer.zeroGrad();
  }, minSeconds);
  model.dispose();
  return { msPerStep: seconds * 1000, tokensPerSecond: (batch * seq) / seconds };
}
