import { embedding, linear, mul, type Tensor, tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { type Embedding, type Linear, Module, type Parameter, whileForwarding } from '@ddp/nn';
import { checkBooleanOptions, checkOptionNames, tf } from '@ddp/tensor';
import { TensorParallelError } from './errors.js';
import { freeAfter } from './intermediates.js';
import { copyToTp, gatherFromTp, reduceFromTp, splitToTp } from './regions.js';
import { replicateParameter, sameRequiresGrad, shardParameter } from './shard.js';

/** A master layer's values: weight [out, in] and optional bias [out], the same on every tp rank. */
export interface LinearMaster {
  weight: tf.Tensor;
  bias: tf.Tensor | null;
}

const masterOf = (l: Linear): LinearMaster => ({ weight: l.weight.data, bias: l.bias?.data ?? null });

/**
 * Y = X Aᵀ with A split by output rows: each tp rank holds out/tp rows of the weight (and
 * bias) and computes its slice of the output features. The input passes copyToTp (its
 * gradient is all-reduced); with gatherOutput the slices are all-gathered.
 */
export class ColumnParallelLinear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;

  constructor(
    master: LinearMaster,
    readonly group: ProcessGroup,
    readonly gatherOutput = false,
  ) {
    super();
    this.weight = this.registerParameter(
      'weight',
      shardParameter(master.weight, 0, group, 'ColumnParallelLinear weight'),
    );
    this.bias = this.registerParameter(
      'bias',
      master.bias ? shardParameter(master.bias, 0, group, 'ColumnParallelLinear bias') : null,
    );
  }

  /** Shards an nn Linear (which stays the caller's), frozen parameters staying frozen. */
  static fromLinear(l: Linear, group: ProcessGroup, opts: { gatherOutput?: boolean } = {}): ColumnParallelLinear {
    const error = (m: string) => new TensorParallelError(m);
    checkOptionNames('ColumnParallelLinear.fromLinear', opts, ['gatherOutput'], error);
    checkBooleanOptions('ColumnParallelLinear.fromLinear', opts, ['gatherOutput'], error);
    return sameRequiresGrad(new ColumnParallelLinear(masterOf(l), group, opts.gatherOutput ?? false), l);
  }

  /** This rank's output slice for an input already inside the tp region (copied once for several layers). */
  local(xParallel: Tensor): Tensor {
    return linear(xParallel, this.weight, this.bias);
  }

  forward(x: Tensor): Promise<Tensor> {
    return whileForwarding(this, 'ColumnParallelLinear', async () => {
      const y = tidy(() => this.local(copyToTp(x, this.group)));
      return this.gatherOutput ? freeAfter(gatherFromTp(y, this.group), y) : y;
    });
  }
}

/**
 * Y = X Aᵀ + b with A split by input columns: each tp rank multiplies its slice of the input
 * features by its in/tp weight columns and the partial outputs are summed (reduceFromTp);
 * the bias is replicated and added once, after the sum. With inputIsParallel false the full
 * input is split first.
 */
export class RowParallelLinear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;

  constructor(
    master: LinearMaster,
    readonly group: ProcessGroup,
    readonly inputIsParallel = true,
  ) {
    super();
    this.weight = this.registerParameter('weight', shardParameter(master.weight, 1, group, 'RowParallelLinear weight'));
    this.bias = this.registerParameter('bias', master.bias ? replicateParameter(master.bias) : null);
  }

  static fromLinear(l: Linear, group: ProcessGroup, opts: { inputIsParallel?: boolean } = {}): RowParallelLinear {
    const error = (m: string) => new TensorParallelError(m);
    checkOptionNames('RowParallelLinear.fromLinear', opts, ['inputIsParallel'], error);
    checkBooleanOptions('RowParallelLinear.fromLinear', opts, ['inputIsParallel'], error);
    return sameRequiresGrad(new RowParallelLinear(masterOf(l), group, opts.inputIsParallel ?? true), l);
  }

  forward(x: Tensor): Promise<Tensor> {
    return whileForwarding(this, 'RowParallelLinear', async () => {
      const partial = tidy(() => linear(this.inputIsParallel ? x : splitToTp(x, this.group), this.weight));
      const y = await freeAfter(reduceFromTp(partial, this.group), partial);
      return this.bias ? freeAfter(y.add(this.bias), y) : y;
    });
  }
}

/**
 * An embedding table split by vocabulary rows: rank r holds ids [r·V/tp, (r+1)·V/tp). Each
 * rank looks up the ids it owns (zeros elsewhere) and the results are summed across ranks.
 */
export class VocabParallelEmbedding extends Module {
  readonly weight: Parameter;
  readonly vocabStart: number;
  readonly vocabEnd: number;

  /**
   * The padding row (torch's padding_idx, in [0, vocab)) gets no gradient; null for none. Its
   * owner passes it on to the lookup; the sharded layer once dropped it, and the row trained.
   */
  readonly paddingIdx: number | null;

  constructor(
    masterWeight: tf.Tensor,
    readonly group: ProcessGroup,
    paddingIdx: number | null = null,
  ) {
    super();
    this.weight = this.registerParameter(
      'weight',
      shardParameter(masterWeight, 0, group, 'VocabParallelEmbedding weight'),
    );
    const part = this.weight.shape[0];
    this.vocabStart = group.rank * part;
    this.vocabEnd = this.vocabStart + part;
    const vocab = part * group.size;
    if (paddingIdx !== null && !(Number.isInteger(paddingIdx) && paddingIdx >= 0 && paddingIdx < vocab))
      throw new TensorParallelError(`VocabParallelEmbedding: paddingIdx ${paddingIdx} is not a row of [0, ${vocab})`);
    this.paddingIdx = paddingIdx;
  }

  /**
   * Every id must name a row of the whole vocabulary: an id no rank owns is masked on every
   * rank, so it would embed to zeros without a word (and 2.5 would be cast to row 2).
   */
  private checkIds(ids: number[] | number[][] | tf.Tensor): void {
    const vocab = this.weight.shape[0] * this.group.size;
    const values: number[] = ids instanceof tf.Tensor ? Array.from(ids.dataSync()) : (ids as number[]).flat();
    const bad = values.findIndex((v) => !Number.isInteger(v) || v < 0 || v >= vocab);
    if (bad >= 0) {
      throw new TensorParallelError(
        `rank ${this.group.ranks[this.group.rank]}: VocabParallelEmbedding: id ${values[bad]} (at ${bad}) ` +
          `is not a row of the vocabulary [0, ${vocab})`,
      );
    }
  }

  static fromEmbedding(e: Embedding, group: ProcessGroup): VocabParallelEmbedding {
    return sameRequiresGrad(new VocabParallelEmbedding(e.weight.data, group, e.paddingIdx ?? null), e);
  }

  /** ids: integer ids of any shape (nested arrays or an int32 tf.Tensor); returns [...ids.shape, dim]. */
  forward(ids: number[] | number[][] | tf.Tensor): Promise<Tensor> {
    return whileForwarding(this, 'VocabParallelEmbedding', async () => {
      this.checkIds(ids);
      const [local, keep] = tf.tidy(() => {
        const t = ids instanceof tf.Tensor ? tf.cast(ids, 'int32') : tf.tensor(ids as number[], undefined, 'int32');
        const owned = tf.logicalAnd(tf.greaterEqual(t, this.vocabStart), tf.less(t, this.vocabEnd));
        return [
          tf.where(owned, tf.sub(t, this.vocabStart), tf.zerosLike(t)),
          tf.expandDims(tf.cast(owned, 'float32'), -1),
        ];
      });
      try {
        const pad = this.paddingIdx;
        const owned = pad !== null && pad >= this.vocabStart && pad < this.vocabEnd;
        const masked = tidy(() =>
          mul(embedding(local, this.weight, owned ? { paddingIdx: pad - this.vocabStart } : {}), keep),
        );
        return await freeAfter(reduceFromTp(masked, this.group), masked);
      } finally {
        tf.dispose([local, keep]);
      }
    });
  }
}
