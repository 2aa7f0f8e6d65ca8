import { maskedFill, matmul, softmax, type Tensor, tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { type AttentionCallOptions, Module, type MultiheadAttention } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { TensorParallelError } from './errors.js';
import { freeAfter } from './intermediates.js';
import { ColumnParallelLinear, RowParallelLinear } from './layers.js';
import { copyToTp } from './regions.js';

/**
 * nn.MultiheadAttention (batch-first, self-attention) split by heads over the tp ranks: the
 * q, k and v projections are column-parallel (rank r computes heads [r·H/tp, (r+1)·H/tp)),
 * attention runs on local heads only, and the output projection is row-parallel (its
 * all-reduce is the block's only forward communication). Shards come from the unsharded
 * module's packed in_proj_weight [3E, E] and out_proj.
 */
export class TensorParallelAttention extends Module {
  readonly qProj: ColumnParallelLinear;
  readonly kProj: ColumnParallelLinear;
  readonly vProj: ColumnParallelLinear;
  readonly outProj: RowParallelLinear;
  readonly localHeads: number;
  readonly headDim: number;
  readonly causal: boolean;

  constructor(
    mha: MultiheadAttention,
    readonly group: ProcessGroup,
  ) {
    super();
    const rank = group.ranks[group.rank];
    if (mha.numHeads % group.size !== 0)
      throw new TensorParallelError(
        `rank ${rank}: ${mha.numHeads} heads are not divisible by the tp size ${group.size}`,
      );
    if (mha.dropoutP > 0)
      throw new TensorParallelError(
        `rank ${rank}: TensorParallelAttention does not support attention dropout (p = ${mha.dropoutP})`,
      );
    const e = mha.embedDim;
    const part = (i: number) => {
      const weight = tf.slice(mha.inProjWeight.data, [i * e, 0], [e, e]);
      const bias = mha.inProjBias ? tf.slice(mha.inProjBias.data, [i * e], [e]) : null;
      try {
        const proj = new ColumnParallelLinear({ weight, bias }, group);
        proj.weight.requiresGrad = mha.inProjWeight.requiresGrad; // a frozen projection stays frozen
        if (proj.bias && mha.inProjBias) proj.bias.requiresGrad = mha.inProjBias.requiresGrad;
        return proj;
      } finally {
        tf.dispose(bias ? [weight, bias] : [weight]);
      }
    };
    this.qProj = this.registerModule('q_proj', part(0));
    this.kProj = this.registerModule('k_proj', part(1));
    this.vProj = this.registerModule('v_proj', part(2));
    this.outProj = this.registerModule('out_proj', RowParallelLinear.fromLinear(mha.outProj, group));
    this.localHeads = mha.numHeads / group.size;
    this.headDim = mha.headDim;
    this.causal = mha.causal;
  }

  /**
   * MultiheadAttention's call, self-attention only: a key, value or `attnMask` of another call
   * (cross-attention, a padding mask) raises rather than being ignored; `isCausal` is honoured.
   */
  async forward(
    x: Tensor,
    key: Tensor = x,
    value: Tensor = key,
    { attnMask, isCausal, ...unknown }: AttentionCallOptions = {},
  ): Promise<Tensor> {
    const rank = this.group.ranks[this.group.rank];
    if (key !== x || value !== x)
      throw new TensorParallelError(`rank ${rank}: TensorParallelAttention is self-attention: key and value must be x`);
    const rest = Object.keys(unknown);
    if (attnMask || rest.length > 0)
      throw new TensorParallelError(
        `rank ${rank}: TensorParallelAttention does not support ${attnMask ? 'attnMask' : `option "${rest[0]}"`}; ` +
          'only isCausal (its heads would attend where the mask forbids)',
      );
    const merged = tidy(() => this.localHeadsAttention(x, isCausal === true));
    return freeAfter(this.outProj.forward(merged), merged);
  }

  /** Attention over this rank's heads, their outputs side by side: the output projection's input. */
  private localHeadsAttention(x: Tensor, isCausal: boolean): Tensor {
    const [b, t] = x.shape as [number, number, number];
    // One copyToTp for q, k and v: one all-reduce of the input gradient in backward, not three.
    const xParallel = copyToTp(x, this.group);
    const heads = (proj: ColumnParallelLinear) =>
      proj.local(xParallel).reshape([b, t, this.localHeads, this.headDim]).permute([0, 2, 1, 3]);
    const [q, k, v] = [heads(this.qProj), heads(this.kProj), heads(this.vProj)];
    let scores = matmul(q, k, { transposeB: true }).mul(1 / Math.sqrt(this.headDim));
    if (this.causal || isCausal) {
      const future = tf.tidy(() =>
        tf.greater(tf.reshape(tf.range(0, t, 1, 'int32'), [1, t]), tf.reshape(tf.range(0, t, 1, 'int32'), [t, 1])),
      );
      scores = maskedFill(scores, future, Number.NEGATIVE_INFINITY);
      future.dispose();
    }
    return matmul(softmax(scores, -1), v)
      .permute([0, 2, 1, 3])
      .reshape([b, t, this.localHeads * this.headDim]);
  }
}
