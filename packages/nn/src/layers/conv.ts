import { conv2d, maxPool2d, type Tensor } from '@ddp/autograd';
import { defaultGenerator, type Generator } from '../generator.js';
import { defaultBiasInit, defaultWeightInit } from '../init.js';
import { Module, ModuleError } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';
import { Parameter } from '../parameter.js';

/** One size for both spatial dims, or [height, width]. */
export type Pair = number | [number, number];
/**
 * A size given as one integer or a pair, each at least `min`. Torch's 'same' or 'valid' padding
 * failed untyped (`p.every is not a function`) later, in the op.
 */
function pair(p: Pair, what: string, min: number): [number, number] {
  const [a, b] = typeof p === 'number' ? [p, p] : Array.isArray(p) && p.length === 2 ? p : [Number.NaN, Number.NaN];
  if (!(Number.isInteger(a) && Number.isInteger(b) && a >= min && b >= min)) {
    throw new ModuleError(
      `Conv2d: ${what} must be an integer >= ${min} or a pair of them, got ${JSON.stringify(p)}` +
        (typeof p === 'string' ? " (padding 'same' and 'valid' are not offered: give the padding itself)" : ''),
    );
  }
  return [a, b];
}

export interface Conv2dOptions {
  stride?: Pair;
  padding?: Pair;
  bias?: boolean;
  generator?: Generator;
}

/** nn.Conv2d on NCHW input; weight [out, in, kH, kW] as in PyTorch, zero padding. */
export class Conv2d extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  readonly kernelSize: [number, number];
  readonly stride: [number, number];
  readonly padding: [number, number];

  constructor(
    readonly inChannels: number,
    readonly outChannels: number,
    kernelSize: Pair,
    opts: Conv2dOptions = {},
  ) {
    super();
    const {
      stride = 1,
      padding = 0,
      bias = true,
      generator = defaultGenerator,
      ...unknown
    } = moduleOptions('Conv2d', opts, ['bias']);
    checkModuleOptions('Conv2d', unknown, ['stride', 'padding', 'bias', 'generator']);
    for (const [what, n] of [
      ['inChannels', inChannels],
      ['outChannels', outChannels],
    ] as const)
      if (!(Number.isInteger(n) && n >= 1)) throw new ModuleError(`Conv2d: ${what} must be an integer >= 1, got ${n}`);
    this.kernelSize = pair(kernelSize, 'kernelSize', 1);
    this.stride = pair(stride, 'stride', 1);
    this.padding = pair(padding, 'padding', 0);
    const shape = [outChannels, inChannels, ...this.kernelSize];
    this.weight = this.registerParameter('weight', Parameter.fromValues(defaultWeightInit(shape, generator), shape));
    const fanIn = inChannels * this.kernelSize[0] * this.kernelSize[1];
    this.bias = this.registerParameter(
      'bias',
      bias ? Parameter.fromValues(defaultBiasInit(outChannels, fanIn, generator), [outChannels]) : null,
    );
  }

  forward(x: Tensor): Tensor {
    return conv2d(x, this.weight, this.bias, { stride: this.stride, padding: this.padding });
  }
}

/** nn.MaxPool2d on NCHW input; stride defaults to the kernel size. */
export class MaxPool2d extends Module {
  constructor(
    readonly kernelSize: Pair,
    readonly options: { stride?: Pair; padding?: Pair } = {},
  ) {
    super();
    checkModuleOptions('MaxPool2d', moduleOptions('MaxPool2d', options), ['stride', 'padding']);
  }
  forward(x: Tensor): Tensor {
    return maxPool2d(x, this.kernelSize, this.options);
  }
}
