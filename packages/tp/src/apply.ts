import type { ProcessGroup } from '@ddp/comm';
import { Embedding, type Module, TransformerBlock } from '@ddp/nn';
import { checkOptionNames } from '@ddp/tensor';
import { TensorParallelBlock } from './block.js';
import { TensorParallelError } from './errors.js';
import { VocabParallelEmbedding } from './layers.js';

function parallelize(m: Module, group: ProcessGroup, embeddings: boolean): Module {
  if (m instanceof TransformerBlock) {
    const block = new TensorParallelBlock(m, group);
    m.attn.dispose();
    for (const layer of m.mlp) layer.dispose();
    return block;
  }
  if (embeddings && m instanceof Embedding && m.numEmbeddings % group.size === 0) {
    const e = VocabParallelEmbedding.fromEmbedding(m, group);
    m.dispose();
    return e;
  }
  return m;
}

export interface ApplyTensorParallelOptions {
  /** Also split every Embedding whose vocabulary divides by the tp size (default true). */
  embeddings?: boolean;
}

/**
 * Shards a model over the tp group in place (picotron's apply_tensor_parallel): every
 * TransformerBlock becomes a TensorParallelBlock (q, k, v and the MLP's up projection
 * column-parallel, attention output and MLP down projection row-parallel) and, unless
 * disabled, every Embedding a VocabParallelEmbedding. Shards are cut from the model's own
 * weights, so build the model identically on every rank (same Generator seed) first.
 * The parallel modules' forwards are async: the model's forward must await its blocks and
 * embeddings. Returns the model (a new module only when `model` itself is replaced).
 */
export function applyTensorParallel(model: Module, group: ProcessGroup, opts: ApplyTensorParallelOptions = {}): Module {
  checkOptionNames('applyTensorParallel', opts, ['embeddings'], (m) => new TensorParallelError(m));
  const embeddings = opts.embeddings ?? true;
  const top = parallelize(model, group, embeddings);
  if (top !== model) return top;
  for (const [name, child] of [...model.namedChildren()]) {
    const converted = applyTensorParallel(child, group, { embeddings });
    if (converted !== child) model.replaceModule(name, converted);
  }
  return model;
}
