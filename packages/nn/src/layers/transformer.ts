import type { Tensor } from '@ddp/autograd';
import { defaultGenerator, type Generator } from '../generator.js';
import { Module } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';
import { Dropout, GELU } from './activation.js';
import { MultiheadAttention } from './attention.js';
import { Sequential } from './container.js';
import { Linear } from './linear.js';
import { LayerNorm } from './norm.js';

export interface TransformerBlockOptions {
  /** Hidden width of the MLP as a multiple of dModel (default 4). */
  mlpRatio?: number;
  dropout?: number;
  causal?: boolean;
  generator?: Generator;
}

/**
 * A pre-norm transformer block (GPT-2 style): x + attn(ln1(x)), then x + mlp(ln2(x)), the MLP
 * being Linear → GELU → Linear → Dropout.
 */
export class TransformerBlock extends Module {
  readonly ln1: LayerNorm;
  readonly attn: MultiheadAttention;
  readonly ln2: LayerNorm;
  readonly mlp: Sequential;
  readonly dropout: Dropout;

  constructor(
    readonly dModel: number,
    readonly numHeads: number,
    opts: TransformerBlockOptions = {},
  ) {
    super();
    const {
      mlpRatio = 4,
      dropout = 0,
      causal = true,
      generator = defaultGenerator,
      ...unknown
    } = moduleOptions('TransformerBlock', opts, ['causal'], ['mlpRatio', 'dropout']);
    checkModuleOptions('TransformerBlock', unknown, ['mlpRatio', 'dropout', 'causal', 'generator']);
    const hidden = Math.round(dModel * mlpRatio);
    this.ln1 = this.registerModule('ln1', new LayerNorm(dModel));
    this.attn = this.registerModule('attn', new MultiheadAttention(dModel, numHeads, { dropout, causal, generator }));
    this.dropout = this.registerModule('dropout', new Dropout(dropout, { generator }));
    this.ln2 = this.registerModule('ln2', new LayerNorm(dModel));
    this.mlp = this.registerModule(
      'mlp',
      new Sequential(
        new Linear(dModel, hidden, { generator }),
        new GELU(),
        new Linear(hidden, dModel, { generator }),
        new Dropout(dropout, { generator }),
      ),
    );
  }

  forward(x: Tensor): Tensor {
    const h = x.add(this.dropout.forward(this.attn.forward(this.ln1.forward(x))));
    return h.add(this.mlp.forward(this.ln2.forward(h)));
  }
}
