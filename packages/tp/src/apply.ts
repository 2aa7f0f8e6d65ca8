import type { ProcessGroup } from '@ddp/comm';
import { Embedding, type Module, type Parameter, TransformerBlock } from '@ddp/nn';
import { checkBooleanOptions, checkOptionNames } from '@ddp/tensor';
import { TensorParallelBlock } from './block.js';
import { TensorParallelError } from './errors.js';
import { VocabParallelEmbedding } from './layers.js';

/** Whether `m` is replaced by a tensor-parallel module (and disposed). */
const isSharded = (m: Module, group: ProcessGroup, embeddings: boolean): boolean =>
  m instanceof TransformerBlock || (embeddings && m instanceof Embedding && m.numEmbeddings % group.size === 0);

/**
 * Refuses a module to be replaced whose parameter another module also holds (an LM head tied to
 * `wte.weight`): disposing the replaced module freed the tied weight under the other module.
 * Checked before anything is replaced, so a refused model is left as it was.
 */
function refuseTiedParameters(model: Module, group: ProcessGroup, embeddings: boolean): void {
  const holders = new Map<Parameter, string[]>();
  for (const [prefix, m] of model.namedModules())
    for (const [name, p] of m.namedParameters(false))
      holders.set(p, [...(holders.get(p) ?? []), prefix ? `${prefix}.${name}` : name]);
  for (const [prefix, m] of model.namedModules()) {
    if (!isSharded(m, group, embeddings)) continue;
    for (const p of m.parameters()) {
      const names = holders.get(p) ?? [];
      const outside = names.find((n) => prefix !== '' && !n.startsWith(`${prefix}.`));
      if (outside)
        throw new TensorParallelError(
          `applyTensorParallel: ${names.find((n) => n !== outside)} is tied to ${outside}, and ${prefix} would be ` +
            'replaced by its shards and disposed under it: untie them (or pass { embeddings: false } for a tied ' +
            'embedding)',
        );
    }
  }
}

/** The tensor-parallel module `m` becomes (its shards cut from its weights; `m` itself left as it is). */
function parallelize(m: TransformerBlock | Embedding, group: ProcessGroup): Module {
  return m instanceof TransformerBlock
    ? new TensorParallelBlock(m, group)
    : VocabParallelEmbedding.fromEmbedding(m, group);
}

/** Frees a module replaced by its shards (a block's own LayerNorms live on in the parallel block). */
function disposeReplaced(m: Module): void {
  if (m instanceof TransformerBlock) {
    m.attn.dispose();
    for (const layer of m.mlp) layer.dispose();
  } else m.dispose();
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
 * embeddings. Returns the model (a new module only when `model` itself is replaced). A
 * parameter the replaced modules share with another module (a head tied to the embedding) is
 * refused with a TensorParallelError.
 */
export function applyTensorParallel(model: Module, group: ProcessGroup, opts: ApplyTensorParallelOptions = {}): Module {
  checkOptionNames('applyTensorParallel', opts, ['embeddings'], (m) => new TensorParallelError(m));
  checkBooleanOptions('applyTensorParallel', opts, ['embeddings'], (m) => new TensorParallelError(m));
  const embeddings = opts.embeddings ?? true;
  refuseTiedParameters(model, group, embeddings);
  return parallelizeTree(model, group, embeddings);
}

/**
 * Every replacement is built before any module is replaced: a block refused late (heads or a width
 * not divisible by the tp size) left the embeddings before it sharded and disposed, a half-parallel
 * model for a script that caught the error (probe CC).
 */
function parallelizeTree(model: Module, group: ProcessGroup, embeddings: boolean): Module {
  const planned: { parent: Module | null; name: string; old: Module; replacement: Module }[] = [];
  const visit = (m: Module, parent: Module | null, name: string): void => {
    if (isSharded(m, group, embeddings))
      planned.push({ parent, name, old: m, replacement: parallelize(m as TransformerBlock | Embedding, group) });
    else for (const [childName, child] of [...m.namedChildren()]) visit(child, m, childName);
  };
  try {
    visit(model, null, '');
  } catch (e) {
    // a parallel block holds the original's layer norms: free only what it made (its shards)
    for (const { replacement: r } of planned) {
      if (r instanceof TensorParallelBlock) for (const own of [r.attn, r.mlp]) own.dispose();
      else r.dispose();
    }
    throw e;
  }
  for (const { parent, name, old, replacement } of planned) {
    parent?.replaceModule(name, replacement);
    disposeReplaced(old);
  }
  return planned.find((p) => p.parent === null)?.replacement ?? model;
}
