import { type Tensor, tidy } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import {
  type Dropout,
  type GELU,
  type LayerNorm,
  type Linear,
  Module,
  type TransformerBlock,
  whileForwarding,
} from '@ddp/nn';
import { TensorParallelAttention } from './attention.js';
import { freeAfter } from './intermediates.js';
import { ColumnParallelLinear, RowParallelLinear } from './layers.js';

/** The MLP Linear → GELU → Linear → Dropout with the up projection column- and the down projection row-parallel. */
export class TensorParallelMLP extends Module {
  readonly up: ColumnParallelLinear;
  readonly down: RowParallelLinear;

  constructor(
    up: Linear,
    readonly act: GELU,
    down: Linear,
    readonly dropout: Dropout,
    group: ProcessGroup,
  ) {
    super();
    this.up = this.registerModule('0', ColumnParallelLinear.fromLinear(up, group));
    this.registerModule('1', act);
    this.down = this.registerModule('2', RowParallelLinear.fromLinear(down, group));
    this.registerModule('3', dropout);
  }

  /** An eval() before this is awaited is refused: the dropout would read the mode after the collectives. */
  forward(x: Tensor): Promise<Tensor> {
    return whileForwarding(this, 'TensorParallelMLP', async () => {
      const up = await this.up.forward(x);
      const act = tidy(() => this.act.forward(up));
      const down = await freeAfter(this.down.forward(act), up, act);
      return freeAfter(
        tidy(() => this.dropout.forward(down)),
        down,
      );
    });
  }
}

/**
 * A TransformerBlock (pre-norm: x + attn(ln1(x)), then x + mlp(ln2(x))) whose attention and
 * MLP are tensor-parallel; the layer norms stay replicated (their gradients come out equal on
 * every tp rank because each parallel region's input gradient is all-reduced).
 */
export class TensorParallelBlock extends Module {
  readonly ln1: LayerNorm;
  readonly attn: TensorParallelAttention;
  readonly dropout: Dropout;
  readonly ln2: LayerNorm;
  readonly mlp: TensorParallelMLP;

  /** Takes over `block`'s layer norms and dropouts; the caller disposes the rest of `block`. */
  constructor(block: TransformerBlock, group: ProcessGroup) {
    super();
    this.ln1 = this.registerModule('ln1', block.ln1);
    this.attn = this.registerModule('attn', new TensorParallelAttention(block.attn, group));
    this.dropout = this.registerModule('dropout', block.dropout);
    this.ln2 = this.registerModule('ln2', block.ln2);
    const [up, act, down, drop] = [...block.mlp] as [Linear, GELU, Linear, Dropout];
    this.mlp = this.registerModule('mlp', new TensorParallelMLP(up, act, down, drop, group));
  }

  forward(x: Tensor): Promise<Tensor> {
    return whileForwarding(this, 'TensorParallelBlock', async () => {
      const normed = tidy(() => this.ln1.forward(x));
      const attended = await freeAfter(this.attn.forward(normed), normed);
      const h = await freeAfter(
        tidy(() => x.add(this.dropout.forward(attended))),
        attended,
      );
      const normed2 = tidy(() => this.ln2.forward(h));
      const mlp = await freeAfter(this.mlp.forward(normed2), normed2);
      return freeAfter(
        tidy(() => h.add(mlp)),
        h,
        mlp,
      );
    });
  }
}
