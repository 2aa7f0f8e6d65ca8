import type { ProcessGroup } from '@ddp/comm';
import { type Module, markGradientShard, markParameterShard, Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import { TensorParallelError } from './errors.js';

/**
 * The tp rank's 1/size part of `t` along `dim` (rows [r·n/size, (r+1)·n/size)), as a new Parameter,
 * its gradient marked as split over the group (so clipGradNorm refuses it and clipGradNormDistributed
 * sums its norm over the group).
 */
export function shardParameter(
  t: tf.Tensor,
  dim: number,
  group: ProcessGroup,
  what: string,
  requiresGrad = true,
): Parameter {
  const n = t.shape[dim];
  if (n % group.size !== 0) {
    throw new TensorParallelError(
      `rank ${group.ranks[group.rank]}: ${what} has ${n} along dim ${dim}, not divisible by the tp size ${group.size}`,
    );
  }
  const part = n / group.size;
  const begin = t.shape.map((_, i) => (i === dim ? group.rank * part : 0));
  const size = t.shape.map((d, i) => (i === dim ? part : d));
  const shard = new Parameter(tf.slice(t, begin, size), requiresGrad);
  if (group.size > 1) {
    markGradientShard(shard, group);
    markParameterShard(shard, group);
  }
  return shard;
}

/** A full copy of `t` as a new Parameter (replicated on every tp rank). */
export function replicateParameter(t: tf.Tensor, requiresGrad = true): Parameter {
  return new Parameter(tf.clone(t), requiresGrad);
}

/**
 * Gives each parameter of `target` the requiresGrad of `source`'s parameter of the same name,
 * so a frozen layer stays frozen once parallel (torch's parallelize_module keeps it too).
 */
export function sameRequiresGrad<M extends Module>(target: M, source: Module): M {
  const frozen = new Map(source.namedParameters(false).map(([name, p]) => [name, p.requiresGrad]));
  for (const [name, p] of target.namedParameters(false)) p.requiresGrad = frozen.get(name) ?? p.requiresGrad;
  return target;
}
