import {
  chunk,
  dropout,
  fromTf,
  linear,
  maskedFill,
  matmul,
  narrow,
  refusePromises,
  softmax,
  type Tensor,
} from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { defaultGenerator, type Generator } from '../generator.js';
import { xavierUniform } from '../init.js';
import { kindOf, Module, ModuleError } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';
import { Parameter } from '../parameter.js';
import { Linear } from './linear.js';

export interface MultiheadAttentionOptions {
  bias?: boolean;
  /** Dropout on the attention weights, in training mode. */
  dropout?: number;
  /** Mask future positions (query i sees keys j <= i) on every call. */
  causal?: boolean;
  generator?: Generator;
}

export interface AttentionCallOptions {
  /**
   * [T, S] or [B, T, S], as torch's attn_mask: boolean, true marks a position that may NOT be
   * attended; or float, added to the scores (0 allowed, −∞ blocked, or a bias such as ALiBi's).
   * An autograd Tensor too: a float one (a learned bias) gets its gradient.
   */
  attnMask?: tf.Tensor | Tensor;
  /** Causal mask for this call (in addition to the module's `causal`). */
  isCausal?: boolean;
}

/**
 * nn.MultiheadAttention with batch-first [B, T, E] tensors. Parameters keep PyTorch's
 * names and init: in_proj_weight [3E, E] (xavier uniform), in_proj_bias [3E] (zeros),
 * out_proj (a Linear, bias zeros). forward returns the attended output only.
 */
export class MultiheadAttention extends Module {
  readonly headDim: number;
  readonly inProjWeight: Parameter;
  readonly inProjBias: Parameter | null;
  readonly outProj: Linear;
  readonly dropoutP: number;
  readonly causal: boolean;
  private readonly generator: Generator;

  constructor(
    readonly embedDim: number,
    readonly numHeads: number,
    opts: MultiheadAttentionOptions = {},
  ) {
    super();
    const {
      bias = true,
      dropout: p = 0,
      causal = false,
      generator = defaultGenerator,
      ...unknown
    } = moduleOptions('MultiheadAttention', opts, ['bias', 'causal'], ['dropout']);
    checkModuleOptions('MultiheadAttention', unknown, ['bias', 'dropout', 'causal', 'generator']);
    if (embedDim % numHeads !== 0)
      throw new ModuleError(`embedDim ${embedDim} is not divisible by numHeads ${numHeads}`);
    this.headDim = embedDim / numHeads;
    this.dropoutP = p;
    this.causal = causal;
    this.generator = generator;
    const shape = [3 * embedDim, embedDim];
    this.inProjWeight = this.registerParameter(
      'in_proj_weight',
      Parameter.fromValues(xavierUniform(shape, 1, generator), shape),
    );
    this.inProjBias = this.registerParameter('in_proj_bias', bias ? new Parameter(tf.zeros([3 * embedDim])) : null);
    this.outProj = this.registerModule('out_proj', new Linear(embedDim, embedDim, { bias, generator }));
    if (this.outProj.bias) this.outProj.bias.data = tf.zerosLike(this.outProj.bias.data);
  }

  /** [B, L, E] → heads [B, H, L, D] */
  private heads(y: Tensor): Tensor {
    const [b, l] = y.shape as [number, number, number];
    return y.reshape([b, l, this.numHeads, this.headDim]).permute([0, 2, 1, 3]);
  }

  /** x [B, L, E] projected by rows [i·E, (i+1)·E) of the packed in-projection, split into heads [B, H, L, D]. */
  private project(x: Tensor, i: number): Tensor {
    const e = this.embedDim;
    return this.heads(
      linear(x, narrow(this.inProjWeight, 0, i * e, e), this.inProjBias && narrow(this.inProjBias, 0, i * e, e)),
    );
  }

  /**
   * q, k, v of self-attention (one input): one product with the whole packed in-projection, as
   * PyTorch's in_projection_packed, then one rank-4 permute to [B, 3H, L, D] and a split.
   */
  private projectPacked(x: Tensor): [Tensor, Tensor, Tensor] {
    const [b, l] = x.shape as [number, number, number];
    const qkv = linear(x, this.inProjWeight, this.inProjBias).reshape([b, l, 3 * this.numHeads, this.headDim]);
    return chunk(qkv.permute([0, 2, 1, 3]), 3, 1) as [Tensor, Tensor, Tensor];
  }

  forward(query: Tensor, key: Tensor = query, value: Tensor = key, options: AttentionCallOptions = {}): Tensor {
    refusePromises('MultiheadAttention', [query, key, value]);
    if (query.rank !== 3 || query.shape[2] !== this.embedDim) {
      throw new ModuleError(`MultiheadAttention expects [batch, seq, ${this.embedDim}], got [${query.shape}]`);
    }
    // options given as key or value: an untyped TypeError, or "linear: operands must be float32, got undefined"
    const Autograd = Object.getPrototypeOf(query).constructor;
    for (const [name, t] of [
      ['key', key],
      ['value', value],
    ] as const)
      if (!(t instanceof Autograd))
        throw new ModuleError(
          `MultiheadAttention.forward: ${name} must be a Tensor, got ${kindOf(t)}; pass the options fourth: ` +
            'forward(x, x, x, { attnMask, isCausal })',
        );
    // torch's keywords (key_padding_mask, is_causal) or a mask given in this place were ignored: no masking at all
    if (options instanceof tf.Tensor || (options as unknown) instanceof Object.getPrototypeOf(query).constructor)
      throw new ModuleError('MultiheadAttention.forward: pass a mask as { attnMask } (ddp has no key padding mask)');
    checkModuleOptions(
      'MultiheadAttention.forward',
      moduleOptions('MultiheadAttention.forward', options, ['isCausal']),
      ['attnMask', 'isCausal'],
    );
    const [b, t] = query.shape as [number, number, number];
    const s = key.shape[1];
    // another batch was broadcast (matmul's batch rule): one key batch served every query batch (probe BX)
    for (const [name, x] of [
      ['key', key],
      ['value', value],
    ] as const)
      if (x.rank !== 3 || x.shape[0] !== b || x.shape[1] !== s || x.shape[2] !== this.embedDim)
        throw new ModuleError(
          `MultiheadAttention.forward: ${name} is [${x.shape}]; with query [${query.shape}] and key ` +
            `[${key.shape}] it must be [${b}, ${s}, ${this.embedDim}]`,
        );
    const [q, k, v] =
      query === key && key === value
        ? this.projectPacked(query)
        : [this.project(query, 0), this.project(key, 1), this.project(value, 2)];
    let scores = matmul(q, k, { transposeB: true }).mul(1 / Math.sqrt(this.headDim)); // [B, H, T, S]
    const given = options.attnMask;
    // an autograd Tensor mask reached tf.reshape, whose untyped error named neither the module nor the mask
    const attnMask = given === undefined || given instanceof tf.Tensor ? given : given.data;
    const layout = attnMask ? this.maskLayout(attnMask.shape, b, t, s) : [];
    if (given !== undefined && !(given instanceof tf.Tensor) && attnMask?.dtype === 'float32') {
      scores = scores.add(given.reshape(layout));
    } else if (attnMask?.dtype === 'float32') {
      const bias = fromTf(tf.reshape(attnMask, layout));
      try {
        scores = scores.add(bias);
      } finally {
        bias.dispose();
      }
    }
    const mask = this.mask(t, s, attnMask, layout, options.isCausal);
    if (mask) {
      try {
        scores = maskedFill(scores, mask, Number.NEGATIVE_INFINITY);
      } finally {
        mask.dispose();
      }
    }
    let weights = softmax(scores, -1);
    if (this.training && this.dropoutP > 0)
      weights = dropout(weights, this.dropoutP, { seed: this.generator.nextUint32() });
    const heads = matmul(weights, v); // [B, H, T, D]
    const merged = heads.permute([0, 2, 1, 3]).reshape([b, t, this.embedDim]);
    return this.outProj.forward(merged);
  }

  /**
   * The shape a mask takes to broadcast to the scores [B, H, T, S]: [T, S], [B, T, S] (one per batch
   * element), torch's [B·H, T, S] (batch-major, then heads) or [B, H, T, S]; a 1 may stand for B, H or T
   * (a key-padding mask [B, 1, 1, S] or [B, 1, S]). The source dim must be S itself: any shape that only
   * broadcast was taken, and a [B, S, 1] padding bias unsqueezed the wrong way biased queries, not keys,
   * silently (probe BX; torch refuses it).
   */
  private maskLayout(mask: readonly number[], b: number, t: number, s: number): number[] {
    const h = this.numHeads;
    const fits = (got: number | undefined, want: number) => got === want || got === 1;
    const [rows, cols] = mask.slice(-2);
    if (cols === s && fits(rows, t)) {
      if (mask.length === 2) return [rows, s];
      if (mask.length === 3 && mask[0] === b * h && h > 1 && b * h !== 1) return [b, h, rows, s];
      if (mask.length === 3 && fits(mask[0], b)) return [mask[0], 1, rows, s];
      if (mask.length === 4 && fits(mask[0], b) && fits(mask[1], h)) return [...mask];
    }
    throw new ModuleError(
      `MultiheadAttention: attnMask is [${mask}]; it must be [${t}, ${s}] (target × source), [${b}, ${t}, ${s}] ` +
        `(per batch element), torch's [${b * h}, ${t}, ${s}] (batch × heads) or [${b}, ${h}, ${t}, ${s}], a 1 ` +
        `standing for a batch, head or target dim`,
    );
  }

  /**
   * The boolean mask (true = blocked) broadcastable to [B, H, T, S], or null. A float attnMask
   * is added instead (forward); an int one is refused, as torch refuses it: cast to bool, a 0/1
   * mask meant "attend here" would block where it allows.
   */
  private mask(
    t: number,
    s: number,
    attnMask: tf.Tensor | undefined,
    layout: number[],
    isCausal?: boolean,
  ): tf.Tensor | null {
    if (attnMask && attnMask.dtype !== 'bool' && attnMask.dtype !== 'float32') {
      throw new ModuleError(`MultiheadAttention: attnMask must be bool or float32 (as torch's), got ${attnMask.dtype}`);
    }
    const causal = this.causal || isCausal === true;
    const blocked = attnMask?.dtype === 'bool' ? attnMask : undefined;
    if (!causal && !blocked) return null;
    return tf.tidy(() => {
      const parts: tf.Tensor[] = [];
      if (causal)
        parts.push(
          tf.greater(tf.reshape(tf.range(0, s, 1, 'int32'), [1, s]), tf.reshape(tf.range(0, t, 1, 'int32'), [t, 1])),
        );
      if (blocked) parts.push(tf.reshape(blocked, layout));
      return parts.reduce((a, c) => tf.logicalOr(a, c));
    });
  }
}
