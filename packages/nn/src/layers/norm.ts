import { batchNormStats, layerNorm, noGrad, refusePromises, Tensor, where } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { Module, ModuleError } from '../module.js';
import { checkModuleOptions, moduleOptions } from '../module-options.js';
import { Parameter } from '../parameter.js';

export interface LayerNormOptions {
  eps?: number;
  elementwiseAffine?: boolean;
  bias?: boolean;
}

/** nn.LayerNorm over the trailing dims `normalizedShape`; weight ones, bias zeros. */
export class LayerNorm extends Module {
  readonly normalizedShape: number[];
  readonly eps: number;
  readonly weight: Parameter | null;
  readonly bias: Parameter | null;

  constructor(normalizedShape: number | number[], opts: LayerNormOptions = {}) {
    super();
    const {
      eps = 1e-5,
      elementwiseAffine = true,
      bias = true,
      ...unknown
    } = moduleOptions('LayerNorm', opts, ['elementwiseAffine', 'bias'], ['eps']);
    checkModuleOptions('LayerNorm', unknown, ['eps', 'elementwiseAffine', 'bias']);
    this.normalizedShape = typeof normalizedShape === 'number' ? [normalizedShape] : [...normalizedShape];
    // 2.5, -1, NaN or '4' failed in tfjs, untyped (or at the first forward without affine weights; probe CY)
    if (!this.normalizedShape.every((d) => Number.isInteger(d) && d >= 0))
      throw new ModuleError(`LayerNorm: normalizedShape must be integers >= 0, got ${String(normalizedShape)}`);
    this.eps = eps;
    this.weight = this.registerParameter(
      'weight',
      elementwiseAffine ? new Parameter(tf.ones(this.normalizedShape)) : null,
    );
    this.bias = this.registerParameter(
      'bias',
      elementwiseAffine && bias ? new Parameter(tf.zeros(this.normalizedShape)) : null,
    );
  }

  forward(x: Tensor): Tensor {
    refusePromises('LayerNorm', [x]);
    // without the affine weights nothing else compares the trailing dims: [2, 3] into LayerNorm(4) normalised over 3
    const trailing = x.shape.slice(x.rank - this.normalizedShape.length);
    if (x.rank < this.normalizedShape.length || trailing.some((d, i) => d !== this.normalizedShape[i])) {
      const shape = this.normalizedShape.join(', ');
      throw new ModuleError(`LayerNorm([${shape}]) expects input of shape [*, ${shape}], got [${x.shape.join(', ')}]`);
    }
    return layerNorm(x, this.weight, this.bias, { eps: this.eps, normalizedDims: this.normalizedShape.length });
  }
}

export interface BatchNormOptions {
  eps?: number;
  /** Weight of the newest batch in the running averages; null for a cumulative average. */
  momentum?: number | null;
  affine?: boolean;
  trackRunningStats?: boolean;
}

/**
 * Batch normalisation over every dim but the channel dim 1 (torch's _BatchNorm): training
 * normalises with the biased batch variance and updates running_var with the unbiased one;
 * eval uses the running statistics. Buffers keep PyTorch's names (running_mean,
 * running_var, num_batches_tracked) so state dicts interoperate.
 */
export abstract class BatchNorm extends Module {
  readonly eps: number;
  readonly momentum: number | null;
  readonly trackRunningStats: boolean;
  readonly weight: Parameter | null;
  readonly bias: Parameter | null;
  protected abstract readonly inputRanks: readonly number[];

  constructor(
    readonly numFeatures: number,
    opts: BatchNormOptions = {},
  ) {
    super();
    const {
      eps = 1e-5,
      momentum = 0.1,
      affine = true,
      trackRunningStats = true,
      ...unknown
    } = moduleOptions(new.target.name, opts, ['affine', 'trackRunningStats'], ['eps', 'momentum']);
    checkModuleOptions(new.target.name, unknown, ['eps', 'momentum', 'affine', 'trackRunningStats']);
    if (!(Number.isInteger(numFeatures) && numFeatures > 0))
      throw new ModuleError(`${new.target.name}: numFeatures must be a positive integer, got ${numFeatures}`);
    this.eps = eps;
    this.momentum = momentum;
    this.trackRunningStats = trackRunningStats;
    this.weight = this.registerParameter('weight', affine ? new Parameter(tf.ones([numFeatures])) : null);
    this.bias = this.registerParameter('bias', affine ? new Parameter(tf.zeros([numFeatures])) : null);
    this.registerBuffer('running_mean', trackRunningStats ? new Tensor(tf.zeros([numFeatures])) : null);
    this.registerBuffer('running_var', trackRunningStats ? new Tensor(tf.ones([numFeatures])) : null);
    this.registerBuffer('num_batches_tracked', trackRunningStats ? new Tensor(tf.scalar(0, 'int32')) : null);
  }

  get runningMean(): Tensor {
    return this.getBuffer('running_mean');
  }
  get runningVar(): Tensor {
    return this.getBuffer('running_var');
  }

  /** Batch statistics (biased) and the number of values each was taken over. */
  protected batchStats(x: Tensor, dims: number[]): { mean: Tensor; var: Tensor; count: number } {
    const count = dims.reduce((n, d) => n * x.shape[d], 1);
    return { ...batchNormStats(x, dims), count };
  }

  /**
   * running ← (1 − m)·running + m·batch, with the unbiased variance (no graph). An empty batch
   * only counts (torch): its statistics are undefined (were garbage in running_mean).
   */
  protected updateRunningStats(mean: tf.Tensor, biasedVar: tf.Tensor, count: number): void {
    const tracked = this.getBuffer('num_batches_tracked');
    const batches = tracked.dataSync()[0] + 1;
    // kept: a forward inside a tf.tidy (checkpoint's) freed the new buffers when it ended (probe CP)
    tracked.data = tf.keep(tf.scalar(batches, 'int32'));
    if (count === 0) return;
    const m = this.momentum ?? 1 / batches;
    const unbiased = count > 1 ? count / (count - 1) : 1;
    const update = (old: tf.Tensor, batch: tf.Tensor, k: number) =>
      tf.keep(tf.tidy(() => tf.add(tf.mul(old, 1 - m), tf.mul(batch, k))));
    this.runningMean.data = update(this.runningMean.data, mean, m);
    this.runningVar.data = update(this.runningVar.data, biasedVar, m * unbiased);
  }

  forward(x: Tensor): Tensor {
    refusePromises(this.constructor.name, [x]);
    if (!this.inputRanks.includes(x.rank)) {
      throw new ModuleError(
        `${this.constructor.name} expects input of rank ${this.inputRanks.join(' or ')}, got shape [${x.shape}]`,
      );
    }
    if (x.shape[1] !== this.numFeatures)
      throw new ModuleError(`${this.constructor.name}(${this.numFeatures}) got ${x.shape[1]} channels`);
    // in eval the running statistics met an int input in tfjs's arithmetic (batchNormStats refuses it in training)
    if (x.dtype !== 'float32') throw new ModuleError(`${this.constructor.name}: input must be float32, got ${x.dtype}`);
    const dims = x.shape.map((_, i) => i).filter((i) => i !== 1);
    const bshape = x.shape.map((d, i) => (i === 1 ? d : 1));
    const useBatch = this.training || !this.trackRunningStats;
    let mean: Tensor;
    let variance: Tensor;
    if (useBatch) {
      const stats = this.batchStats(x, dims);
      // one value per channel normalises to 0 whatever it is: torch refuses it, so do we
      if (stats.count === 1) {
        throw new ModuleError(
          `${this.constructor.name}: expected more than 1 value per channel when training, got input [${x.shape}]`,
        );
      }
      if (this.training && this.trackRunningStats)
        noGrad(() => this.updateRunningStats(stats.mean.data, stats.var.data, stats.count));
      mean = stats.mean.reshape(bshape);
      variance = stats.var.reshape(bshape);
    } else {
      mean = new Tensor(tf.reshape(this.runningMean.data, bshape));
      variance = new Tensor(tf.reshape(this.runningVar.data, bshape));
    }
    // batch statistics only: torch's eval divides by √running_var as it is
    let y =
      this.eps === 0 && useBatch
        ? normalizedWithoutEps(x, mean, variance)
        : x.sub(mean).div(variance.add(this.eps).sqrt());
    if (this.weight) y = y.mul(this.weight.reshape(bshape));
    if (this.bias) y = y.add(this.bias.reshape(bshape));
    return y;
  }
}

/** (x − mean) / √var with eps 0: a channel of variance 0 normalises to 0, as torch's (invstd 0 there, not inf). */
function normalizedWithoutEps(x: Tensor, mean: Tensor, variance: Tensor): Tensor {
  const constant = tf.equal(variance.data, 0);
  try {
    return where(constant, 0, x.sub(mean).div(where(constant, 1, variance).sqrt()));
  } finally {
    constant.dispose();
  }
}

/** nn.BatchNorm1d: input [N, C] or [N, C, L]. */
export class BatchNorm1d extends BatchNorm {
  protected readonly inputRanks = [2, 3];
}

/** nn.BatchNorm2d: input [N, C, H, W]. */
export class BatchNorm2d extends BatchNorm {
  protected readonly inputRanks = [4];
}
