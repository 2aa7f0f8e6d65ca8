import { checkOptionValue, tf } from '@ddp/tensor';
import { AutogradArgumentError, argumentError, checkOptions, refusePromises } from '../errors.js';
import { AutogradFunction } from '../function.js';
import type { Context } from '../node.js';
import { tidy } from '../scope.js';
import type { Tensor } from '../tensor.js';
import { sub } from './arithmetic.js';
import { broadcastShapes } from './broadcast.js';
import { type Indices, toIndexTensor } from './index-tensor.js';
import { gather } from './indexing.js';
import { reportMeanCount } from './mean-counts.js';
import { requireFloat32 } from './promotion.js';
import { mean, sum } from './reduce.js';
import { square } from './unary.js';

const REDUCTIONS = ['mean', 'sum', 'none'] as const;
export type Reduction = (typeof REDUCTIONS)[number];

/** The labels on the host: one-hot rows, where each row's label sits in the flat [N · C] logits, which count. */
interface Targets {
  /** [N, C], all zero where ignored. */
  target: tf.Tensor;
  /** i · C + label (0 where ignored). */
  at: Int32Array;
  /** Whether each row's label counts (not ignored). */
  counts: Uint8Array;
  valid: number;
}

/**
 * The labels' targets, checked on the host: the labels are N integers, one read instead of a
 * chain of small comparison kernels.
 */
function targetsOf(labels: tf.Tensor, classes: number, ignoreIndex: number): Targets {
  const values = labels.dataSync();
  const rows = new Float32Array(values.length * classes);
  const at = new Int32Array(values.length);
  const counts = new Uint8Array(values.length);
  let valid = 0;
  const bad: number[] = [];
  values.forEach((l, i) => {
    if (l === ignoreIndex) return;
    if (!(l >= 0 && l < classes)) bad.push(l);
    else {
      rows[i * classes + l] = 1;
      at[i] = i * classes + l;
      counts[i] = 1;
    }
    valid++;
  });
  if (bad.length > 0) {
    throw new AutogradArgumentError(
      `crossEntropy: label ${bad[0]} is out of range for ${classes} classes (${bad.length} such labels; ` +
        `ignoreIndex is ${ignoreIndex})`,
    );
  }
  return { target: tf.tensor2d(rows, [values.length, classes]), at, counts, valid };
}

/**
 * Log-softmax and cross entropy of logits [N, C] against integer labels [N] as one node;
 * ignored labels add nothing. Backward: (softmax − one-hot) on the rows that count, scaled.
 */
class CrossEntropy extends AutogradFunction {
  private reduction: Reduction = 'mean';
  private count = 1;
  private ignored = false;
  forward(ctx: Context, logits: tf.Tensor, labels: tf.Tensor, ignoreIndex: number, reduction: Reduction): tf.Tensor {
    if (logits.rank !== 2 || labels.rank !== 1 || labels.shape[0] !== logits.shape[0]) {
      throw new AutogradArgumentError(
        `crossEntropy wants logits [N, C] and labels [N], got [${logits.shape}] and [${labels.shape}]`,
      );
    }
    this.reduction = reduction;
    const { target, at, counts, valid } = targetsOf(labels, logits.shape[1]!, ignoreIndex);
    this.count = Math.max(1, valid);
    this.ignored = valid < labels.shape[0];
    // log-softmax from one exp, whose values also give the softmax backward needs (no second exp)
    const shifted = tf.sub(logits, tf.max(logits, 1, true));
    const e = tf.exp(shifted);
    const total = tf.sum(e, 1, true);
    ctx.keepForBackward(tf.div(e, total), target);
    // each row's target log-probability gathered (N values), not the one-hot times every log-probability: a −∞
    // logit in another class (a masked one) made 0 · −∞ = NaN of the whole row
    const chosen = tf.sub(
      gather(tf.reshape(shifted, [-1]), tf.tensor1d(at, 'int32'), 0),
      tf.log(tf.reshape(total, [-1])),
    );
    const picked = this.ignored ? tf.where(tf.tensor1d(counts, 'bool'), chosen, tf.zerosLike(chosen)) : chosen;
    if (reduction === 'none') return tf.neg(picked);
    if (reduction === 'mean') reportMeanCount(valid);
    // torch's mean over no label (all ignored, or no rows) is 0/0 = NaN; its gradient stays 0
    if (reduction === 'mean' && valid === 0) return tf.scalar(Number.NaN);
    return tf.mul(tf.sum(picked), reduction === 'sum' ? -1 : -1 / this.count);
  }
  backward(ctx: Context, dy: tf.Tensor) {
    const [softmax, target] = ctx.savedTensors as [tf.Tensor, tf.Tensor];
    // rows of ignored labels: one-hot all zero, and their softmax must not count either
    const probs = this.ignored ? tf.mul(softmax, tf.sum(target, 1, true)) : softmax;
    const g = tf.sub(probs, target);
    if (this.reduction === 'none') return [tf.mul(g, tf.expandDims(dy, 1)), null, null, null];
    return [tf.mul(g, this.reduction === 'sum' ? dy : tf.div(dy, this.count)), null, null, null];
  }
}

/**
 * F.cross_entropy(logits [N, C], labels [N]) with ignoreIndex (default -100) and reduction
 * (default mean over the labels not ignored: NaN when every label is ignored, as torch's).
 */
export function crossEntropy(
  logits: Tensor,
  labels: Indices,
  opts: { ignoreIndex?: number; reduction?: Reduction } = {},
): Tensor {
  refusePromises('crossEntropy', [logits, labels]);
  checkOptions('crossEntropy', opts, ['ignoreIndex', 'reduction']);
  checkOptionValue('crossEntropy', 'reduction', opts.reduction, REDUCTIONS, argumentError);
  requireFloat32('crossEntropy', logits);
  // a fractional ignoreIndex equals no label, so nothing was ignored (torch refuses a non-integer one)
  if (opts.ignoreIndex !== undefined && !Number.isSafeInteger(opts.ignoreIndex))
    throw new AutogradArgumentError(`crossEntropy: ignoreIndex must be an integer, got ${opts.ignoreIndex}`);
  const idx = toIndexTensor(labels, 'crossEntropy');
  try {
    return CrossEntropy.apply(logits, idx, opts.ignoreIndex ?? -100, opts.reduction ?? 'mean');
  } finally {
    idx.dispose();
  }
}

/** Shape pairs already warned about: torch's UserWarning shows once per place, this once per pair. */
const warnedShapes = new Set<string>();

/**
 * torch's warning for a loss whose target has another shape than its input: a prediction [N, 1]
 * against a target [N] broadcasts to [N, N] and averages every pair, a wrong loss that trains.
 */
function warnIfBroadcast(op: string, input: number[], target: number[], shape: number[]): void {
  const pair = `[${target}] vs [${input}]`;
  if (String(input) === String(target) || warnedShapes.has(pair)) return;
  warnedShapes.add(pair);
  process.emitWarning(
    `${op}: the target's size [${target}] differs from the input's [${input}]; they broadcast to ` +
      `[${shape}], which is likely wrong (torch warns the same). Make them the same size.`,
    { code: 'DDP_LOSS_BROADCAST' },
  );
}

/** F.mse_loss: mean (or sum / none) of (input - target)^2; both sides may require grad. */
export function mse(input: Tensor, target: Tensor, opts: { reduction?: Reduction } = {}): Tensor {
  refusePromises('mse', [input, target]);
  checkOptions('mse', opts, ['reduction']);
  checkOptionValue('mse', 'reduction', opts.reduction, REDUCTIONS, argumentError);
  const reduction = opts.reduction ?? 'mean';
  warnIfBroadcast('mse', input.shape, target.shape, broadcastShapes('mse (input, target)', input.shape, target.shape));
  return tidy(() => {
    const sq = square(sub(input, target));
    if (reduction === 'mean') reportMeanCount(sq.size);
    return reduction === 'none' ? sq : reduction === 'sum' ? sum(sq) : mean(sq);
  });
}
