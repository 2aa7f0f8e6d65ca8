import { dropout, gelu, relu, type Tensor, tanh } from '@ddp/autograd';
import { checkOptionValue } from '@ddp/tensor';
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

type Approximate = 'none' | 'tanh';

/** nn.GELU: the exact erf form, or approximate 'tanh' (`new GELU('tanh')` or `new GELU({ approximate: 'tanh' })`). */
export class GELU extends Module {
  readonly approximate: Approximate;
  constructor(approximate: Approximate | { approximate?: Approximate } = 'none') {
    super();
    // the options object torch's keyword suggests was taken for a string and ignored
    const value = typeof approximate === 'object' && approximate !== null ? approximate.approximate : approximate;
    if (typeof approximate === 'object' && approximate !== null)
      checkModuleOptions('GELU', approximate, ['approximate']);
    checkOptionValue('GELU', 'approximate', value, ['none', 'tanh'], (m) => new ModuleError(m));
    this.approximate = value ?? 'none';
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
    // '0.5' from a config passed the range check and failed at the first forward
    if (!(typeof p === 'number' && p >= 0 && p <= 1))
      throw new ModuleError(`Dropout: probability must be a number in [0, 1], got ${JSON.stringify(p)}`);
    this.generator = generator;
  }
  forward(x: Tensor): Tensor {
    if (!this.training || this.p === 0) return dropout(x, this.p, { training: false });
    return dropout(x, this.p, { training: true, seed: this.generator.nextUint32() });
  }
}
