import { gradientShardGroups, type NormReduceGroup, type Tensor, whileWriting } from '@ddp/autograd';
import { checkBooleanOptions, checkOptionNames, tf } from '@ddp/tensor';
import { OptimizerError, refuseFreedParameters, refusePendingGradients } from './optimizer.js';

function checkArguments(what: string, maxNorm: number, normType: number, errorIfNonfinite: boolean): void {
  checkBooleanOptions(what, { errorIfNonfinite }, ['errorIfNonfinite'], (message) => new OptimizerError(message));
  if (!(typeof maxNorm === 'number' && maxNorm >= 0))
    throw new OptimizerError(`${what}: maxNorm must be >= 0, got ${maxNorm}`);
  if (!(typeof normType === 'number' && normType > 0))
    throw new OptimizerError(`${what}: normType must be > 0 (or Infinity), got ${normType}`);
}

/** One gradient's share of the total: the sum of |g|^p, or max |g| for the infinity norm. */
function localPart(grad: tf.Tensor, normType: number): number {
  return tf.tidy(() => {
    const abs = tf.abs(grad);
    if (normType === Number.POSITIVE_INFINITY) return tf.max(abs).dataSync()[0];
    return tf.sum(tf.pow(abs, normType)).dataSync()[0];
  });
}

/**
 * Each parameter once: a tied weight listed under two modules (`[...encoder.parameters(),
 * ...decoder.parameters()]`) would count twice in the norm and be scaled twice (by coef², as
 * torch's clip_grad_norm_ does).
 */
const eachOnce = (params: Iterable<Tensor>): Tensor[] => [...new Set(params)];

/**
 * Scales every gradient by min(1, maxNorm / (total + 1e-6)), as torch; a NaN total makes every
 * gradient NaN as torch's does (coef < 1 was false for NaN: the other gradients stepped unclipped).
 * With errorIfNonfinite, a NaN or infinite total raises instead and leaves the gradients (torch's
 * error_if_nonfinite); every rank of a distributed norm holds the same total, so all raise.
 */
function scaleGradients(what: string, withGrad: Tensor[], maxNorm: number, total: number, errorIfNonfinite: boolean) {
  if (errorIfNonfinite && !Number.isFinite(total))
    throw new OptimizerError(
      `${what}: the total norm of the gradients is ${total}, so they cannot be clipped ` +
        '(errorIfNonfinite: true; pass false to clip anyway, as torch does by default)',
    );
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  if (!(coef >= 1)) for (const p of withGrad) p.grad = tf.mul(p.grad as tf.Tensor, coef);
}

/**
 * torch.nn.utils.clip_grad_norm_: scales every gradient by min(1, maxNorm / (total + 1e-6)),
 * where total is the norm of all gradients together. Returns the total norm before clipping.
 * Gradients split over ranks (tensor-parallel shards, pipeline stages, FSDP or ZeRO-2 shards,
 * marked by those packages) are refused: their norm needs every rank's part
 * (clipGradNormDistributed), and each rank clipping by its own part's norm steps the model
 * differently on every rank.
 */
export function clipGradNorm(
  params: Iterable<Tensor>,
  maxNorm: number,
  normType = 2,
  errorIfNonfinite = false,
): number {
  checkArguments('clipGradNorm', maxNorm, normType, errorIfNonfinite);
  const unique = eachOnce(params);
  refusePendingGradients('clipGradNorm', unique);
  refuseFreedParameters('clipGradNorm', unique, 'they were taken');
  // every parameter, with a gradient or not: a rank whose shards hold none (ZeRO-2 with more ranks
  // than parameters) returned 0 while the others refused, and went on to the next collective
  const split = unique.findIndex((p) => gradientShardGroups(p).length > 0);
  if (split >= 0) {
    const ranks = gradientShardGroups(unique[split] as Tensor).map((g) => `[${g.ranks}]`);
    throw new OptimizerError(
      `clipGradNorm: gradient ${split} is split over the ranks ${ranks.join(' and ')} (a shard or a stage ` +
        'on each), so this rank alone cannot know the norm; use await clipGradNormDistributed(params, maxNorm, ' +
        '{ groups }) on every rank',
    );
  }
  const withGrad = unique.filter((p) => p.grad !== null);
  if (withGrad.length === 0) return 0;
  let total = 0;
  for (const p of withGrad) {
    const part = localPart(p.grad as tf.Tensor, normType);
    total = normType === Number.POSITIVE_INFINITY ? Math.max(total, part) : total + part;
  }
  if (normType !== Number.POSITIVE_INFINITY) total **= 1 / normType;
  scaleGradients('clipGradNorm', withGrad, maxNorm, total, errorIfNonfinite);
  return total;
}

/**
 * clipGradNorm over a model whose gradients are split over ranks: the norm of the whole
 * model's gradient, the same on every rank. `groups` lists, in the same order on every rank,
 * each process group a gradient may be split over (e.g. `[grid.tpGroup]`, or `[ppGroup]`); every
 * rank of each calls this. A gradient marked with groups (markGradientShard) has its parts
 * summed over them; an unmarked one (replicated: a layer norm under tensor parallelism, any
 * gradient DDP averaged) counts once. One small all-reduce per group.
 */
export async function clipGradNormDistributed(
  params: Iterable<Tensor>,
  maxNorm: number,
  opts: { groups: readonly NormReduceGroup[]; normType?: number; errorIfNonfinite?: boolean },
): Promise<number> {
  const unique = eachOnce(params);
  refusePendingGradients('clipGradNormDistributed', unique);
  refuseFreedParameters('clipGradNormDistributed', unique, 'they were taken');
  // not awaited, the step took the gradients unclipped, and the clip scaled them after (probe X)
  return whileWriting(unique, 'clipGradNormDistributed()', 'gradients', () => clipDistributed(unique, maxNorm, opts));
}

async function clipDistributed(
  unique: Tensor[],
  maxNorm: number,
  opts: { groups: readonly NormReduceGroup[]; normType?: number; errorIfNonfinite?: boolean },
): Promise<number> {
  // a misspelt `norm_type: Infinity` clipped by the 2-norm, silently
  const known = ['groups', 'normType', 'errorIfNonfinite'];
  checkOptionNames('clipGradNormDistributed', opts, known, (m) => new OptimizerError(m));
  const { groups, normType = 2, errorIfNonfinite = false } = opts;
  checkArguments('clipGradNormDistributed', maxNorm, normType, errorIfNonfinite);
  const infinity = normType === Number.POSITIVE_INFINITY;
  const combine = (a: number, b: number) => (infinity ? Math.max(a, b) : a + b);
  // parts[mask]: gradients split over the groups whose bits are set, not yet reduced over them
  const parts = new Float64Array(2 ** groups.length);
  const withGrad = unique.filter((p) => p.grad !== null);
  for (const [i, p] of withGrad.entries()) {
    let mask = 0;
    for (const g of gradientShardGroups(p)) {
      const k = groups.indexOf(g);
      if (k < 0)
        throw new OptimizerError(`clipGradNormDistributed: gradient ${i} is split over [${g.ranks}], not in groups`);
      mask |= 1 << k;
    }
    parts[mask] = combine(parts[mask], localPart(p.grad as tf.Tensor, normType));
  }
  for (const [k, group] of groups.entries()) {
    const bit = 1 << k;
    const masks = [...parts.keys()].filter((m) => m & bit);
    const reduced = Float64Array.from(masks, (m) => parts[m]);
    await group.allReduce(reduced, { op: infinity ? 'max' : 'sum' }).wait();
    masks.forEach((m, j) => {
      parts[m] = 0;
      parts[m & ~bit] = combine(parts[m & ~bit], reduced[j]);
    });
  }
  const total = infinity ? parts[0] : parts[0] ** (1 / normType);
  scaleGradients('clipGradNormDistributed', withGrad, maxNorm, total, errorIfNonfinite);
  return total;
}
