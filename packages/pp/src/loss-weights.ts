import type { Indices } from '@ddp/autograd';
import { PipelineStageError } from './stage.js';

/** How the stage's loss function reduces a micro-batch: to the mean over what it counts, or to the sum. */
export type LossReduction = 'mean' | 'sum';

/** crossEntropy's default ignoreIndex: in a float32 target it may be padding of class indices or a value. */
const IGNORED_CLASS = -100;

/**
 * The target entries a loss averages over: every element of a float target (a regression's, whose
 * values may be negative: a float32 tensor, or a list holding a fraction); of class indices (an
 * int32 tensor, a list of integers), the non-negative ones (a negative one is an ignored index:
 * crossEntropy's -100 padding). A float32 tensor of integers holding -100 could be either (class
 * indices made with tf.tensor, which crossEntropy takes): refused, rather than guessed.
 */
function countedTargets(target: Indices, microBatch: number, stage: number): number {
  const values = Array.isArray(target) ? target.flat() : target.dataSync();
  const fractional = values.some((v) => !Number.isInteger(v));
  const float = !Array.isArray(target) && target.dtype === 'float32';
  if (float && !fractional && values.includes(IGNORED_CLASS))
    throw new PipelineStageError(
      `stage ${stage}: micro-batch ${microBatch}'s target is a float32 tensor of integers holding -100: class ` +
        "indices with crossEntropy's padding (make it int32), or a regression's values (give the micro-batch a count)?",
    );
  if (float || fractional) return values.length;
  let n = 0;
  for (const v of values) if (v >= 0) n++;
  return n;
}

/**
 * Each micro-batch's weight, so that the weighted losses add up to the whole batch's loss: a
 * 'sum' is the sum of the micro-batches' sums (weight 1); a 'mean' is the micro-batches' means
 * weighted by their share of what the loss averages over — `counts[i]` if given, else the
 * target's non-negative entries. Weighting by rows instead gave 2.299 for 2.270 when a row was
 * mostly padding, and scaled a 'sum' down by the micro-batch count.
 */
export function lossWeights(
  targets: Indices[],
  counts: (number | undefined)[],
  reduction: LossReduction,
  stage: number,
): number[] {
  if (reduction === 'sum') {
    const given = counts.findIndex((c) => c !== undefined);
    if (given >= 0)
      throw new PipelineStageError(
        `stage ${stage}: micro-batch ${given} has a count, which weights a 'mean' loss; a 'sum' is weighted 1`,
      );
    return targets.map(() => 1);
  }
  if (reduction !== 'mean')
    throw new PipelineStageError(`stage ${stage}: lossReduction is 'mean' or 'sum', not ${String(reduction)}`);
  const n = targets.map((t, i) => counts[i] ?? countedTargets(t, i, stage));
  const bad = n.findIndex((c) => !(Number.isFinite(c) && c > 0));
  if (bad >= 0)
    throw new PipelineStageError(
      `stage ${stage}: micro-batch ${bad} counts ${n[bad]} targets: its mean loss is not a number, and the ` +
        "batch's mean cannot be made of the micro-batches' means; move its rows into another micro-batch",
    );
  const total = n.reduce((a, b) => a + b, 0);
  return n.map((c) => c / total);
}

/**
 * After the step's losses, before the optimizer steps: micro-batches weighted by their counted targets
 * against what each one's 'mean' loss averaged over (crossEntropy's and mse's report it). A non-negative
 * ignoreIndex (padding id 0), float32 class indices padded with -1, or a loss over other entries than
 * the target's were weighted wrongly, silently (probe AT: 1.598 for the batch's 1.705). Skipped where a
 * micro-batch was given its count, or its loss reported no single mean.
 */
export function checkWeights(
  averaged: readonly (number | null)[],
  weights: readonly number[],
  counts: readonly (number | undefined)[],
  stage: number,
): void {
  if (counts.some((c) => c !== undefined) || averaged.length !== weights.length) return;
  if (averaged.some((d) => d === null)) return;
  const total = (averaged as number[]).reduce((a, b) => a + b, 0);
  if (total === 0) return;
  const off = averaged.findIndex((d, i) => Math.abs((d as number) / total - weights[i]) > 1e-6 * weights[i] + 1e-12);
  if (off < 0) return;
  throw new PipelineStageError(
    `stage ${stage}: micro-batch ${off}'s loss averaged over ${averaged[off]} of the batch's ${total} entries, but ` +
      `pipelineStep weighted it ${weights[off].toFixed(4)} from its target's non-negative class indices: a ` +
      'non-negative ignoreIndex, another ignored index in a float32 target, or a loss over other entries than ' +
      "the target's; give each micro-batch its count (the gradients of this step are wrong: do not step)",
  );
}
