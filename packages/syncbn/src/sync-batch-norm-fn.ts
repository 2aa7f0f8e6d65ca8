import { AutogradFunction, type Context } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import { moments, tf } from '@ddp/tensor';
import { SyncBatchNormError } from './errors.js';

export interface SyncStatsOptions {
  group: ProcessGroup;
  eps: number;
  /** Called once per forward with the global mean, biased variance and sample count (running stats). */
  onStats?: (mean: tf.Tensor, biasedVar: tf.Tensor, count: number) => void;
}

const hostCopy = async (t: tf.Tensor): Promise<Float32Array> => Float32Array.from((await t.data()) as Float32Array);

/**
 * Global statistics from every rank's [mean, biased variance, count] (PyTorch's
 * batch_norm_gather_stats_with_counts, which gathers invstd instead: 1/invstd² − eps lost the
 * variance of a channel far below eps, even to a negative running_var; probe CD): ranks with no
 * samples weigh nothing.
 */
export function combineStats(
  gathered: Float32Array,
  channels: number,
): { mean: Float64Array; variance: Float64Array; count: number } {
  const stride = 2 * channels + 1;
  const ranks = gathered.length / stride;
  const mean = new Float64Array(channels);
  const variance = new Float64Array(channels);
  let count = 0;
  for (let r = 0; r < ranks; r++) count += gathered[r * stride + 2 * channels];
  for (let c = 0; c < channels; c++) {
    let s = 0;
    for (let r = 0; r < ranks; r++) s += gathered[r * stride + 2 * channels] * gathered[r * stride + c];
    mean[c] = s / count;
    let v = 0;
    for (let r = 0; r < ranks; r++) {
      const n = gathered[r * stride + 2 * channels];
      if (n === 0) continue;
      const m = gathered[r * stride + c];
      v += n * (gathered[r * stride + channels + c] + (m - mean[c]) ** 2);
    }
    variance[c] = v / count;
  }
  return { mean, variance, count };
}

/**
 * Batch norm over all ranks' samples (torch.nn.modules._functions.SyncBatchNorm).
 * forward: local [mean, invstd, count] are all-gathered (so batch sizes may differ, even be
 * zero) and combined; backward: [sum_dy, sum_dy_xmu] are all-reduced, so dx is that of the
 * sum of every rank's loss. weight/bias gradients stay local (DDP reduces them).
 */
export class SyncBatchNormFn extends AutogradFunction {
  private group!: ProcessGroup;
  private axes: number[] = [];
  private totalCount = 0;

  async forward(
    ctx: Context,
    x: tf.Tensor,
    weight: tf.Tensor | null,
    bias: tf.Tensor | null,
    opts: SyncStatsOptions,
  ): Promise<tf.Tensor> {
    const { group, eps } = opts;
    this.group = group;
    const channels = x.shape[1]!;
    this.axes = x.shape.map((_, i) => i).filter((i) => i !== 1);
    const localCount = x.size / channels;
    const packed = new Float32Array(2 * channels + 1);
    packed[2 * channels] = localCount;
    if (localCount > 0) {
      const stats = tf.tidy(() => {
        const { mean, variance } = moments(x, this.axes);
        return tf.concat([mean, variance]);
      });
      packed.set(await hostCopy(stats));
      stats.dispose();
    }
    const gathered = new Float32Array(packed.length * group.size);
    await group.allGatherInto(gathered, packed).wait();
    const { mean, variance, count } = combineStats(gathered, channels);
    if (count === 0)
      throw new SyncBatchNormError(
        `rank ${group.ranks[group.rank]}: SyncBatchNorm got no samples on any of the ${group.size} ranks`,
      );
    // one value per channel normalises to 0 whatever it is (torch refuses it too); every rank sees the same count
    if (count === 1)
      throw new SyncBatchNormError(
        `rank ${group.ranks[group.rank]}: SyncBatchNorm expected more than 1 value per channel when training, ` +
          `got 1 over the ${group.size} ranks`,
      );
    this.totalCount = count;
    const bshape = x.shape.map((d, i) => (i === 1 ? d : 1));
    const meanT = tf.tensor(Float32Array.from(mean), bshape);
    // eps 0 and a constant channel: invstd 0, as torch's (rsqrt(0) = inf made its output and gradients NaN)
    const invstdT = tf.tidy(() => {
      const v = tf.add(tf.tensor(Float32Array.from(variance), bshape), eps);
      return tf.where(tf.equal(v, 0), tf.zerosLike(v), tf.rsqrt(v));
    });
    if (opts.onStats) {
      const v = tf.tensor1d(Float32Array.from(variance));
      const m = tf.reshape(meanT, [channels]);
      opts.onStats(m, v, count);
      tf.dispose([v, m]);
    }
    const w = weight ? tf.reshape(weight, bshape) : tf.ones(bshape);
    ctx.saveForBackward(x, meanT, invstdT, w);
    const y = tf.tidy(() => {
      let out = tf.mul(tf.mul(tf.sub(x, meanT), invstdT), w);
      if (bias) out = tf.add(out, tf.reshape(bias, bshape));
      return out;
    });
    tf.dispose([meanT, invstdT, w]);
    return y;
  }

  async backward(ctx: Context, dy: tf.Tensor) {
    const [x, mean, invstd, w] = ctx.savedTensors as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor];
    const channels = x.shape[1]!;
    const empty = x.size === 0;
    // Local per-channel sums (zeros on a rank without samples; reductions of empty tensors are undefined on wasm).
    const local = empty
      ? tf.zeros([2 * channels])
      : tf.tidy(() => tf.concat([tf.sum(dy, this.axes), tf.sum(tf.mul(dy, tf.sub(x, mean)), this.axes)]));
    const sums = await hostCopy(local);
    local.dispose();
    // weight/bias gradients are this rank's share (before the all-reduce below).
    const dw = ctx.needsInputGrad[1]
      ? tf.tidy(() => tf.mul(tf.tensor1d(sums.slice(channels)), tf.reshape(invstd, [channels])))
      : null;
    const db = ctx.needsInputGrad[2] ? tf.tensor1d(sums.slice(0, channels)) : null;
    let dx: tf.Tensor | null = null;
    if (ctx.needsInputGrad[0]) {
      await this.group.allReduce(sums).wait();
      dx = empty
        ? tf.zerosLike(x)
        : tf.tidy(() => {
            const bshape = mean.shape;
            const meanDy = tf.div(tf.tensor(sums.slice(0, channels), bshape), this.totalCount);
            const meanDyXmu = tf.div(tf.tensor(sums.slice(channels), bshape), this.totalCount);
            const xmu = tf.sub(x, mean);
            const inner = tf.sub(tf.sub(dy, meanDy), tf.mul(tf.mul(xmu, tf.square(invstd)), meanDyXmu));
            return tf.mul(tf.mul(inner, invstd), w);
          });
    }
    return [dx, dw, db, null];
  }
}
