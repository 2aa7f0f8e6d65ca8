import { tf } from '@ddp/tensor';
import { AutogradArgumentError } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import type { Tensor } from '../tensor.js';
import { tidy } from '../scope.js';
import { broadcastShapes } from './broadcast.js';
import { type Indices, toIndexTensor } from './indexing.js';
import { logSoftmaxKernel } from './softmax.js';
import { sub } from './arithmetic.js';
import { mean, sum } from './reduce.js';
import { square } from './unary.js';

export type Reduction = 'mean' | 'sum' | 'none';

/** Cross entropy of logits [N, C] against integer labels [N]; ignored labels add nothing. */
class CrossEntropy extends AutogradFunction {
  private reduction: Reduction = 'mean';
  private count = 1;
  forward(ctx: Context, logits: tf.Tensor, labels: tf.Tensor, ignoreIndex: number, reduction: Reduction): tf.Tensor {
    if (logits.rank !== 2 || labels.rank !== 1 || labels.shape[0] !== logits.shape[0]) {
      throw new AutogradArgumentError(`crossEntropy wants logits [N, C] and labels [N], got [${logits.shape}] and [${labels.shape}]`);
    }
    this.reduction = reduction;
    const classes = logits.shape[1]!;
    const valid = tf.notEqual(labels, ignoreIndex);
    // labels outside [0, C) that are not ignored: counted in the same read as the valid labels
    const outside = tf.logicalAnd(valid, tf.logicalOr(tf.less(labels, 0), tf.greaterEqual(labels, classes)));
    const [validCount, badCount] = tf.stack([tf.sum(tf.cast(valid, 'int32')), tf.sum(tf.cast(outside, 'int32'))]).dataSync() as Int32Array;
    if (badCount! > 0) {
      const bad = [...labels.dataSync()].filter((l) => l !== ignoreIndex && (l < 0 || l >= classes));
      throw new AutogradArgumentError(`crossEntropy: label ${bad[0]} is out of range for ${classes} classes (${badCount} such labels; ignoreIndex is ${ignoreIndex})`);
    }
    const target = tf.mul(tf.oneHot(tf.where(valid, labels, tf.zerosLike(labels)), classes), tf.expandDims(tf.cast(valid, 'float32'), 1));
    const logp = logSoftmaxKernel(logits, 1);
    const perRow = tf.neg(tf.sum(tf.mul(target, logp), 1));
    this.count = Math.max(1, validCount!);
    ctx.saveForBackward(logp, target);
    if (reduction === 'none') return perRow;
    const total = tf.sum(perRow);
    return reduction === 'sum' ? total : tf.div(total, this.count);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [logp, target] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    // d/dlogits = (softmax - onehot) on valid rows (target rows of ignored labels are all zero)
    const rowValid = tf.sum(target, 1, true);
    const g = tf.sub(tf.mul(tf.exp(logp), rowValid), target);
    if (this.reduction === 'none') return [tf.mul(g, tf.expandDims(dy, 1)), null, null, null];
    const scale = this.reduction === 'sum' ? dy : tf.div(dy, this.count);
    return [tf.mul(g, scale), null, null, null];
  }
}

/**
 * F.cross_entropy(logits [N, C], labels [N]) with ignoreIndex (default -100) and reduction
 * (default mean over the labels not ignored).
 */
export function crossEntropy(logits: Tensor, labels: Indices, opts: { ignoreIndex?: number; reduction?: Reduction } = {}): Tensor {
  const idx = toIndexTensor(labels);
  try {
    return CrossEntropy.apply(logits, idx, opts.ignoreIndex ?? -100, opts.reduction ?? 'mean');
  } finally {
    idx.dispose();
  }
}

/** F.mse_loss: mean (or sum / none) of (input - target)^2; both sides may require grad. */
export function mse(input: Tensor, target: Tensor, opts: { reduction?: Reduction } = {}): Tensor {
  const reduction = opts.reduction ?? 'mean';
  broadcastShapes('mse (input, target)', input.shape, target.shape);
  return tidy(() => {
    const sq = square(sub(input, target));
    return reduction === 'none' ? sq : reduction === 'sum' ? sum(sq) : mean(sq);
  });
}
