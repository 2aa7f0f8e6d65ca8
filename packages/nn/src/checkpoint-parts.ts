// Which part of a model a checkpoint holds. Tensor-parallel ranks hold shards under the same names
// (told apart by their position in the group), pipeline stages hold their own layers (other
// names). Loading must find the same part; saving must not replace another part's entry.
import { createHash } from 'node:crypto';
import { parameterShardOf, type Tensor } from '@ddp/autograd';
import { CheckpointError } from './checkpoint-errors.js';

/**
 * The parts of split parameters `params` holds ("the shards of part 1 of 2"), or null when all are
 * whole. By position in the group, not by global ranks: the same tensor-parallel rank of another
 * data-parallel replica holds the same shards (it was refused).
 */
export function shardsHeld(params: Iterable<Tensor>): string | null {
  const held = new Set<string>();
  for (const p of params) {
    const shard = parameterShardOf(p);
    if (shard) held.add(`part ${shard.rank} of ${shard.ranks.length}`);
  }
  return held.size > 0 ? `the shards of ${[...held].sort().join('; ')}` : null;
}

/**
 * Refuses to load a checkpoint holding other shards than `params` (`saved`: its record; undefined
 * before checkpoints recorded it): a tensor-parallel shard has the same name and shape on every rank,
 * and another rank's loaded silently.
 */
export function refuseOtherShards(
  path: string,
  saved: string | null | undefined,
  params: Iterable<Tensor>,
  error: (message: string) => Error,
): void {
  const held = shardsHeld(params);
  const recorded = saved === undefined ? held : recordedShards(saved);
  if (recorded !== held)
    throw error(
      `${path} holds ${recorded ?? 'whole parameters'}, this model ${held ?? 'whole parameters'}: ` +
        'save each rank of a tensor-parallel model into its own directory and load it on the same rank',
    );
}

/** A checkpoint's record of shards in today's words; before, they named global ranks ("rank 1 of [2,3]"). */
function recordedShards(saved: string | null): string | null {
  if (saved === null || !saved.startsWith('the shards of ')) return saved;
  const parts = saved
    .slice('the shards of '.length)
    .split('; ')
    .map((p) => p.replace(/^rank (\d+) of \[([\d,]*)\]$/, (_, r, ranks) => `part ${r} of ${ranks.split(',').length}`));
  return `the shards of ${[...new Set(parts)].sort().join('; ')}`;
}

/** A digest of the model's tensor names and shards: equal for the replicas of one part, unequal across parts. */
export function modelPart(names: Iterable<string>, shards: string | null): string {
  return createHash('sha256')
    .update(JSON.stringify([[...names].sort(), shards]))
    .digest('hex')
    .slice(0, 16);
}

/**
 * Refuses to commit over `newest` when it holds this step of another part of the model: every
 * tensor- or pipeline-parallel rank saving into one directory committed in turn, each commit's
 * clean-up removed the entry before, and only the last rank's part was left (all acknowledged).
 */
export function refuseOtherPart(
  where: string,
  dir: string,
  newest: Record<string, unknown> | null,
  step: number,
  part: string,
) {
  if (newest === null || newest.step !== step || typeof newest.modelPart !== 'string' || newest.modelPart === part)
    return;
  throw new CheckpointError(
    `${where}: its newest entry holds step ${step} of another part of the model (other parameter ` +
      'names or shards: another tensor- or pipeline-parallel rank saving here?), which this commit would delete. ' +
      `Save each model-parallel rank into its own directory (e.g. ${dir}/rank-<rank>)`,
  );
}
