import { dropout, gelu, relu, type Tensor, tanh } from '@ddp/autograd';
import { defaultGenerator, type Generator } from '../generator.js';
import { Module, ModuleError } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';

export class ReLU extends Module {
  forward(x: Tensor): Tensor {
    return relu(x);
  }
}

export class Tanh extends Module {
  forward(x: Tensor): Tensor {
    return tanh(x);
  }
}

/** nn.GELU: the exact erf form, or approximate: 'tanh'. */
export class GELU extends Module {
  constructor(readonly approximate: 'none' | 'tanh' = 'none') {
    super();
  }
  forward(x: Tensor): Tensor {
    return gelu(x, { approximate: this.approximate });
  }
}

/**
 * nn.Dropout: active in training mode only. Each mask's seed is drawn from `generator`, so
 * ranks seeded alike drop the same elements and a checkpoint's generator state replays them.
 */
export class Dropout extends Module {
  private readonly generator: Generator;
  constructor(
    readonly p = 0.5,
    opts: { generator?: Generator } = {},
  ) {
    super();
    const { generator = defaultGenerator, ...unknown } = moduleOptions('Dropout', opts);
    checkModuleOptions('Dropout', unknown, ['generator']);
    if (!(p >= 0 && p <= 1)) throw new ModuleError(`Dropout: probability must be in [0, 1], got ${p}`);
    this.generator = generator;
  }
  forward(x: Tensor): Tensor {
    if (!this.training || this.p === 0) return dropout(x, this.p, { training: false });
    return dropout(x, this.p, { training: true, seed: this.generator.nextUint32() });
  }
}
