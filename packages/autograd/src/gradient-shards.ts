// Which parameters' gradients are split over ranks, and over which process groups: tensor
// parallelism's shards, a pipeline stage's parameters, FSDP's and ZeRO-2's shards. The packages
// that split them mark them here, so the norm of a gradient (clip-grad.ts) is taken over all ranks.
import type { Tensor } from './tensor.js';

/** What the norm needs of a process group (@ddp/comm's ProcessGroup has it; nn imports no comm). */
export interface NormReduceGroup {
  /** Global ranks of the members. */
  readonly ranks: readonly number[];
  allReduce(buf: Float64Array, opts: { op: 'sum' | 'max' }): { wait(): Promise<unknown> };
}

const shardGroups = new WeakMap<Tensor, NormReduceGroup[]>();

/**
 * Marks `param`'s gradient as split over `group`: each member holds a distinct part of the whole
 * (a tensor-parallel shard, or a pipeline stage's own parameter). Marking twice with one group is
 * a no-op; a parameter can be split over several (tensor and pipeline parallel).
 */
export function markGradientShard(param: Tensor, group: NormReduceGroup): void {
  const groups = shardGroups.get(param) ?? [];
  if (!groups.includes(group)) shardGroups.set(param, [...groups, group]);
}

/**
 * Ends what markGradientShard(param, group) said: the split is over (a ZeRO-2 optimizer
 * disposed). A mark that outlived it made a later norm of whole, averaged gradients sum them
 * over the ranks: √N too large.
 */
export function unmarkGradientShard(param: Tensor, group: NormReduceGroup): void {
  const groups = (shardGroups.get(param) ?? []).filter((g) => g !== group);
  if (groups.length > 0) shardGroups.set(param, groups);
  else shardGroups.delete(param);
}

/** The groups `param`'s gradient is split over (none: a whole gradient, the same on every rank). */
export function gradientShardGroups(param: Tensor): readonly NormReduceGroup[] {
  return shardGroups.get(param) ?? [];
}

/**
 * The index of the first of `params` whose gradient is split over two or more of `ranks` (those
 * ranks hold parts of it, not replicas: FSDP's shards, tensor-parallel ones, pipeline stages'), or
 * -1. What treats the ranks' copies as replicas (ZeRO, Adasum) would combine the parts as one.
 */
export function firstSplitAmong(params: readonly Tensor[], ranks: readonly number[]): number {
  const members = new Set(ranks);
  return params.findIndex((p) => gradientShardGroups(p).some((g) => g.ranks.filter((r) => members.has(r)).length > 1));
}

/** A parameter whose value is this rank's part of a whole split over `ranks` (a tensor-parallel shard). */
export interface ParameterShard {
  readonly ranks: readonly number[];
  /** This process's position in `ranks`. */
  readonly rank: number;
}

const parameterShards = new WeakMap<Tensor, ParameterShard>();

/**
 * Marks `param`'s value as this rank's part of a whole split over `group` (its name and shape are
 * the same on every rank): a checkpoint records which part it holds, and refuses to load it as
 * another rank's part (the shards of one rank were loaded on the other, silently).
 */
export function markParameterShard(param: Tensor, group: ParameterShard): void {
  parameterShards.set(param, { ranks: [...group.ranks], rank: group.rank });
}

/** Which part of a split parameter this process holds, if it is one. */
export function parameterShardOf(param: Tensor): ParameterShard | undefined {
  return parameterShards.get(param);
}
