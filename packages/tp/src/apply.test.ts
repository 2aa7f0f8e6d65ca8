import { type Tensor, tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import {
  Embedding,
  Generator,
  Linear,
  Module,
  MultiheadAttention,
  OptimizerError,
  Sequential,
  SGD,
  TransformerBlock,
} from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { describe, expect, it } from 'vitest';
import {
  applyTensorParallel,
  ColumnParallelLinear,
  RowParallelLinear,
  TensorParallelAttention,
  TensorParallelBlock,
  TensorParallelError,
  VocabParallelEmbedding,
} from './index.js';
import { TinyGpt } from './test/tiny-gpt.js';

/** Sharding reads only a group's rank and size; a group of one never communicates. */
const groupOf = (size: number, rank = 0) => ({ rank, size, ranks: [...Array(size).keys()] }) as unknown as ProcessGroup;

const config = { vocab: 12, seq: 4, dim: 8, heads: 2, layers: 2 };
const ids = [
  [1, 5, 7, 2],
  [0, 11, 3, 3],
];

/** An LM head that reuses the embedding's weight (GPT-2's tied wte / lm_head). */
class TiedLm extends Module {
  readonly wte: Embedding;
  constructor() {
    super();
    this.wte = this.registerModule('wte', new Embedding(12, 8, { generator: new Generator(5) }));
    const head = this.registerModule('head', new Sequential());
    head.registerParameter('weight', this.wte.weight);
  }
  forward(ids: number[][]): Tensor {
    return this.wte.forward(ids).matmul(this.wte.weight.transpose());
  }
}

describe('applyTensorParallel', () => {
  // before: the embedding was sharded and disposed, and the head's tied weight with it (a crash at its next use)
  it('refuses a replaced module whose weight another module holds, and leaves the model as it was', () => {
    const model = new TiedLm();
    expect(() => applyTensorParallel(model, groupOf(2))).toThrow(
      /^applyTensorParallel: wte.weight is tied to head.weight, and wte would be replaced by its shards/,
    );
    expect(model.wte).toBeInstanceOf(Embedding);
    expect(model.forward(ids).shape).toEqual([2, 4, 12]);
    expect(applyTensorParallel(model, groupOf(2), { embeddings: false })).toBe(model);
    model.dispose();
  });

  it('replaces every block and embedding in place, and with tp = 1 computes the same logits', async () => {
    const plain = new TinyGpt(config, new Generator(5));
    const sharded = new TinyGpt(config, new Generator(5));
    expect(applyTensorParallel(sharded, groupOf(1))).toBe(sharded);
    expect([...sharded.blocks].every((b) => b instanceof TensorParallelBlock)).toBe(true);
    expect(sharded.wte).toBeInstanceOf(VocabParallelEmbedding);
    expect(sharded.modules().some((m) => m instanceof TransformerBlock)).toBe(false);
    const [want, got] = [await plain.forward(ids), await sharded.forward(ids)];
    expect(tf.max(tf.abs(tf.sub(want.data, got.data))).dataSync()[0]).toBeLessThan(1e-6);
    // probe X: eval() before the forward was awaited ran the blocks after the first collective in eval mode
    const pending = sharded.forward(ids);
    expect(() => sharded.eval()).toThrow(/TinyGpt\.eval\(\) while VocabParallelEmbedding's forward still runs/);
    (await pending).dispose();
    sharded.eval();
  });

  it('refuses an option it does not know (ignored, it sharded the embeddings anyway)', () => {
    const model = new TinyGpt(config, new Generator(5));
    expect(() => applyTensorParallel(model, groupOf(1), { embedding: false } as object)).toThrow(TensorParallelError);
    expect(() => applyTensorParallel(model, groupOf(1), { embedding: false } as object)).toThrow(
      /unknown option "embedding"/,
    );
  });

  // torch's parallelize_module leaves such an optimizer holding the old parameters, which get no gradient
  it("the layers' fromLinear refuse an option they do not know (was: ignored, gatherOutputs gave the ungathered slice)", () => {
    const lin = new Linear(4, 6);
    expect(() => ColumnParallelLinear.fromLinear(lin, groupOf(2), { gatherOutputs: true } as object)).toThrow(
      /ColumnParallelLinear.fromLinear: unknown option "gatherOutputs" .*its options are gatherOutput/,
    );
    expect(() => RowParallelLinear.fromLinear(lin, groupOf(2), { inputParallel: false } as object)).toThrow(
      TensorParallelError,
    );
    // a config's string was truthy: `inputIsParallel: 'false'` took the full input for its slice
    const no = 'false' as never;
    expect(() => RowParallelLinear.fromLinear(lin, groupOf(2), { inputIsParallel: no })).toThrow(
      'RowParallelLinear.fromLinear: inputIsParallel must be a boolean, got "false"',
    );
    expect(() => ColumnParallelLinear.fromLinear(lin, groupOf(2), { gatherOutput: no })).toThrow(/must be a boolean/);
    const model = new TinyGpt(config, new Generator(5));
    expect(() => applyTensorParallel(model, groupOf(1), { embeddings: no })).toThrow(/embeddings must be a boolean/);
    lin.dispose();
  });

  it('an optimizer built before it refuses to step (was: every sharded layer silently untrained)', async () => {
    const model = new TinyGpt(config, new Generator(5));
    const opt = new SGD(model.parameters(), { lr: 0.1 });
    applyTensorParallel(model, groupOf(1));
    const loss = (await model.forward(ids)).mean();
    await loss.backward();
    const up = () => Array.from((model.blocks.at(0) as TensorParallelBlock).mlp.up.weight.dataSync());
    const weight = up();
    expect(() => opt.step()).toThrow(OptimizerError);
    expect(() => opt.step()).toThrow(
      /step: parameter \d+ of group 0 was disposed .*model\.parameters\(\) after changing/,
    );
    expect(up()).toEqual(weight); // nothing stepped
    const fresh = new SGD(model.parameters(), { lr: 0.1 });
    fresh.step();
    expect(up()).not.toEqual(weight);
    model.dispose();
  });

  // before: forward(x) took no more arguments, so a padding mask, a per-call causal flag or another key
  // passed as to nn.MultiheadAttention was dropped and every position attended, silently
  it('TensorParallelAttention takes MultiheadAttention call options: isCausal honoured, a mask refused', async () => {
    const mha = new MultiheadAttention(8, 2, { causal: false, generator: new Generator(4) });
    const tp = new TensorParallelAttention(mha, groupOf(1));
    const x = tensor(new Generator(6).normal(2 * 3 * 8), [2, 3, 8]);
    const close = async (got: Promise<{ data: tf.Tensor }>, want: { data: tf.Tensor }) =>
      expect(tf.max(tf.abs(tf.sub((await got).data, want.data))).dataSync()[0]).toBeLessThan(1e-6);
    await close(tp.forward(x), mha.forward(x));
    await close(tp.forward(x, x, x, { isCausal: true }), mha.forward(x, x, x, { isCausal: true }));
    const attnMask = tf.tensor2d(
      [
        [false, true, true],
        [false, false, true],
        [false, false, false],
      ],
      undefined,
      'bool',
    );
    await expect(tp.forward(x, x, x, { attnMask })).rejects.toThrow(
      /^rank 0: TensorParallelAttention does not support attnMask/,
    );
    await expect(tp.forward(x, x.mul(2))).rejects.toThrow(TensorParallelError);
    attnMask.dispose();
  });

  // before: every parallel layer's parameters were new and trainable, so frozen layers trained after sharding
  it('keeps frozen parameters frozen: embedding, attention projections, MLP, bias alone', () => {
    const model = new TinyGpt(config, new Generator(5));
    const block = model.blocks.at(0) as TransformerBlock;
    const frozen = [model.wte.parameters()[0], block.attn.inProjWeight, block.mlp.at(0).parameters()[1]];
    for (const p of frozen) p.requiresGrad = false;
    for (const p of block.attn.outProj.parameters()) p.requiresGrad = false;
    applyTensorParallel(model, groupOf(1));
    const tp = model.blocks.at(0) as TensorParallelBlock;
    const trainable = (ps: { requiresGrad: boolean }[]) => ps.map((p) => p.requiresGrad);
    expect(trainable(model.wte.parameters())).toEqual([false]);
    for (const proj of [tp.attn.qProj, tp.attn.kProj, tp.attn.vProj])
      expect(trainable([proj.weight, proj.bias!])).toEqual([false, true]);
    expect(trainable(tp.attn.outProj.parameters())).toEqual([false, false]);
    expect(trainable([tp.mlp.up.weight, tp.mlp.up.bias!, tp.mlp.down.weight])).toEqual([true, false, true]);
    expect(trainable((model.blocks.at(1) as TensorParallelBlock).parameters()).every(Boolean)).toBe(true);
    model.dispose();
  });

  it('cuts rank 1 of 2 the rows (column-parallel) and columns (row-parallel) of the master weights', () => {
    const block = new TransformerBlock(8, 2, { generator: new Generator(9) });
    const up = Array.from(block.mlp.at(0).parameters()[0].dataSync());
    const down = block.mlp.at(2).parameters()[0].arraySync() as number[][];
    const tpBlock = applyTensorParallel(block, groupOf(2, 1)) as TensorParallelBlock;
    expect(Array.from(tpBlock.mlp.up.weight.dataSync())).toEqual(up.slice(up.length / 2));
    expect(tpBlock.mlp.down.weight.arraySync()).toEqual(down.map((row) => row.slice(row.length / 2)));
  });

  it('VocabParallelEmbedding raises TensorParallelError for an id outside the vocabulary (was: zeros)', async () => {
    const model = new TinyGpt(config, new Generator(5));
    applyTensorParallel(model, groupOf(1));
    const wte = model.wte as VocabParallelEmbedding;
    for (const [ids, id, at] of [
      [[[1, 12]], '12', 1],
      [[[-1, 0]], '-1', 0],
      [[[2.5, 0]], '2\\.5', 0],
    ] as const) {
      await expect(wte.forward(ids.map((r) => [...r])), `ids ${ids}`).rejects.toThrow(
        new RegExp(
          `^rank 0: VocabParallelEmbedding: id ${id} \\(at ${at}\\) is not a row of the vocabulary \\[0, 12\\)`,
        ),
      );
    }
    const ids32 = tf.tensor2d([[3, 12]], undefined, 'int32');
    await expect(wte.forward(ids32)).rejects.toThrow(TensorParallelError);
    ids32.dispose();
    (await wte.forward([[11, 0]])).dispose();
  });

  it('raises TensorParallelError when the heads do not divide by the tp size', () => {
    const model = new TinyGpt(config, new Generator(5));
    expect(() => applyTensorParallel(model, groupOf(3))).toThrow(TensorParallelError);
    expect(() => applyTensorParallel(new TinyGpt(config, new Generator(5)), groupOf(3))).toThrow(
      /2 heads are not divisible by the tp size 3/,
    );
    // probe CC: the embedding (vocab 12 divides by 3) was sharded and disposed before the block was refused
    expect(model.wte).toBeInstanceOf(Embedding);
    expect([...model.blocks].every((b) => b instanceof TransformerBlock)).toBe(true);
    expect((model.wte as Embedding).weight.isDisposed).toBe(false);
    // a block built before the refused one shares its layer norms with the original: they stay alive
    const blocks = new Sequential(new TransformerBlock(8, 2), new TransformerBlock(8, 1));
    expect(() => applyTensorParallel(blocks, groupOf(2))).toThrow(/1 heads are not divisible by the tp size 2/);
    expect(blocks.parameters().some((p) => p.isDisposed)).toBe(false);
    const x = tensor(Array(24).fill(0.5), [1, 3, 8]);
    expect((blocks.forward(x) as Tensor).shape).toEqual([1, 3, 8]);
    x.dispose();
  });
});
