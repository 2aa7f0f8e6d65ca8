import { noGrad, type Tensor, tidy } from '@ddp/autograd';
import { checkGroup, getDefaultGroup, isInitialized, type ProcessGroup } from '@ddp/comm';
import { currentJoinNotice } from '@ddp/join';
import { BatchNorm, type BatchNormOptions, ModuleError, whileForwarding } from '@ddp/nn';
import type { tf } from '@ddp/tensor';
import { SyncBatchNormError } from './errors.js';
import { SyncBatchNormFn } from './sync-batch-norm-fn.js';

export interface SyncBatchNormOptions extends BatchNormOptions {
  /**
   * The ranks whose samples are normalised together (default: the world). null, what newGroup gives a
   * rank outside the group: this rank's batch alone, no communication (as torch's layer on a rank
   * outside its group; it was taken for the world, whose collective the members never joined).
   */
  processGroup?: ProcessGroup | null;
}

/** numFeatures is the channel count: a positive integer. */
function checkNumFeatures(numFeatures: number): number {
  if (!(Number.isInteger(numFeatures) && numFeatures > 0))
    throw new SyncBatchNormError(`SyncBatchNorm: numFeatures must be a positive integer, got ${numFeatures}`);
  return numFeatures;
}

/** BatchNorm's options of ours; a number in their place (torch's positional eps) is refused, not dropped. */
function batchNormOptions(opts: SyncBatchNormOptions): BatchNormOptions {
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts))
    throw new SyncBatchNormError(`SyncBatchNorm: options must be an object of named options, got ${String(opts)}`);
  const { processGroup: _, ...rest } = opts;
  return rest;
}

/**
 * nn.SyncBatchNorm for inputs [N, C, …] (1d and 2d alike): in training the statistics are
 * those of the batch on every rank of the group together. Its training forward communicates,
 * so it is async: `await bn.forwardAsync(x)`. `forward(x)` (synchronous) serves eval mode and
 * groups of one rank, where nothing is exchanged, and otherwise raises SyncBatchNormError.
 * Unlike PyTorch's, it runs on CPU.
 */
export class SyncBatchNorm extends BatchNorm {
  protected readonly inputRanks = [2, 3, 4, 5];
  /** See SyncBatchNormOptions.processGroup: undefined the world, null this rank alone. */
  processGroup: ProcessGroup | null | undefined;

  constructor(numFeatures: number, opts: SyncBatchNormOptions = {}) {
    super(checkNumFeatures(numFeatures), batchNormOptions(opts));
    this.processGroup = checkGroup(opts.processGroup, 'SyncBatchNorm');
  }

  /**
   * The group statistics are taken over, or null when nothing needs exchanging: in eval, even
   * without running statistics (each rank then normalises by its own batch), as torch's.
   */
  private syncGroup(): ProcessGroup | null {
    if (!this.training) return null;
    const group = this.processGroup === undefined ? (isInitialized() ? getDefaultGroup() : null) : this.processGroup;
    return group && group.size > 1 ? group : null;
  }

  /**
   * The SyncBatchNorm to put in place of `bn` (convertSyncBatchnorm), holding bn's own
   * parameters and buffers as torch's conversion does, so an optimizer (or DDP) built before
   * the conversion keeps training them; `bn` must not be used, nor disposed, after.
   */
  static fromBatchNorm(bn: BatchNorm, processGroup?: ProcessGroup | null): SyncBatchNorm {
    const sync = new SyncBatchNorm(bn.numFeatures, {
      eps: bn.eps,
      momentum: bn.momentum,
      affine: bn.weight !== null,
      trackRunningStats: bn.trackRunningStats,
      processGroup,
    });
    sync.replaceParameter('weight', bn.weight);
    sync.replaceParameter('bias', bn.bias);
    for (const [name, buffer] of bn.namedBuffers(false)) sync.setBuffer(name, buffer);
    sync.train(bn.training);
    return sync;
  }

  override forward(x: Tensor): Tensor {
    const group = this.syncGroup();
    if (group) {
      throw new SyncBatchNormError(
        `rank ${group.ranks[group.rank]}: SyncBatchNorm in training over ${group.size} ranks communicates; ` +
          `call await forwardAsync(x)`,
      );
    }
    return super.forward(x);
  }

  async forwardAsync(x: Tensor): Promise<Tensor> {
    const group = this.syncGroup();
    // eval or a group of one: BatchNorm's forward, its intermediates freed (they leaked: 13 tensors a call; probe BA)
    if (!group) return tidy(() => super.forward(x));
    if (!this.inputRanks.includes(x.rank) || x.shape[1] !== this.numFeatures) {
      throw new ModuleError(
        `rank ${group.ranks[group.rank]}: SyncBatchNorm(${this.numFeatures}) expects [N, ${this.numFeatures}, ` +
          `…] of rank 2 to 5, got [${x.shape}]`,
      );
    }
    if (x.dtype !== 'float32')
      throw new ModuleError(`rank ${group.ranks[group.rank]}: SyncBatchNorm: input must be float32, got ${x.dtype}`);
    const onStats = this.trackRunningStats
      ? (m: tf.Tensor, v: tf.Tensor, n: number) => noGrad(() => this.updateRunningStats(m, v, n))
      : undefined;
    // eval() before this is awaited is refused (it read the mode after the await: statistics untracked)
    return whileForwarding(this, 'SyncBatchNorm', async () => {
      // under join, after the iteration's notice: a rank that ran out (throwOnEarlyTermination) stops every
      // rank there, instead of leaving the others in this all-gather until the timeout
      await currentJoinNotice();
      return SyncBatchNormFn.applyAsync(x, this.weight, this.bias, { group, eps: this.eps, onStats });
    });
  }
}
