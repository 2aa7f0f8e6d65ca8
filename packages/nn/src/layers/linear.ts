import { embedding, linear, refusePromises, type Tensor } from '@ddp/autograd';
import { defaultGenerator, type Generator } from '../generator.js';
import { defaultBiasInit, defaultWeightInit, normalInit } from '../init.js';
import { Module, ModuleError } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';
import { Parameter } from '../parameter.js';

export interface LinearOptions {
  bias?: boolean;
  generator?: Generator;
}

/** A layer size must be a non-negative integer (0 is allowed, as in PyTorch). */
function checkSize(layer: string, what: string, n: number): void {
  if (!(Number.isInteger(n) && n >= 0))
    throw new ModuleError(`${layer}: ${what} must be a non-negative integer, got ${n}`);
}

/** y = x Wᵀ + b over the last dim (nn.Linear); weight [out, in] as in PyTorch. */
export class Linear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;

  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    opts: LinearOptions = {},
  ) {
    super();
    const { bias = true, generator = defaultGenerator, ...unknown } = moduleOptions('Linear', opts, ['bias']);
    checkModuleOptions('Linear', unknown, ['bias', 'generator']);
    checkSize('Linear', 'inFeatures', inFeatures);
    checkSize('Linear', 'outFeatures', outFeatures);
    this.weight = this.registerParameter(
      'weight',
      Parameter.fromValues(defaultWeightInit([outFeatures, inFeatures], generator), [outFeatures, inFeatures]),
    );
    this.bias = this.registerParameter(
      'bias',
      bias ? Parameter.fromValues(defaultBiasInit(outFeatures, inFeatures, generator), [outFeatures]) : null,
    );
  }

  forward(x: Tensor): Tensor {
    refusePromises('Linear', [x]);
    if (x.shape[x.shape.length - 1] !== this.inFeatures) {
      throw new ModuleError(
        `Linear(${this.inFeatures}, ${this.outFeatures}): input [${x.shape}] must end in ${this.inFeatures} features`,
      );
    }
    return linear(x, this.weight, this.bias);
  }
}

export interface EmbeddingOptions {
  /** A row that gets no gradient and starts at 0 (torch's padding_idx); negative counts from the end. */
  paddingIdx?: number;
  generator?: Generator;
}

/** Rows of a [numEmbeddings, embeddingDim] table for integer ids (nn.Embedding, N(0, 1) init). */
export class Embedding extends Module {
  readonly weight: Parameter;
  /** The padding row, counted from 0 (torch stores padding_idx the same way), or undefined. */
  readonly paddingIdx: number | undefined;

  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
    opts: EmbeddingOptions = {},
  ) {
    super();
    const { paddingIdx, generator = defaultGenerator, ...unknown } = moduleOptions('Embedding', opts);
    checkModuleOptions('Embedding', unknown, ['paddingIdx', 'generator']);
    checkSize('Embedding', 'numEmbeddings', numEmbeddings);
    checkSize('Embedding', 'embeddingDim', embeddingDim);
    const n = numEmbeddings;
    if (paddingIdx !== undefined && !(Number.isInteger(paddingIdx) && paddingIdx >= -n && paddingIdx < n)) {
      throw new ModuleError(`Embedding: paddingIdx ${paddingIdx} must be an integer in [-${n}, ${n})`);
    }
    this.paddingIdx = paddingIdx !== undefined && paddingIdx < 0 ? paddingIdx + n : paddingIdx;
    const shape = [numEmbeddings, embeddingDim];
    const values = normalInit(shape, 0, 1, generator);
    // torch draws every row, then zeroes the padding one: the same generator state after it
    const pad = this.paddingIdx;
    if (pad !== undefined) values.fill(0, pad * embeddingDim, (pad + 1) * embeddingDim);
    this.weight = this.registerParameter('weight', Parameter.fromValues(values, shape));
  }

  forward(ids: Parameters<typeof embedding>[0]): Tensor {
    return embedding(ids, this.weight, { paddingIdx: this.paddingIdx });
  }
}
