import { isGradEnabled, type Tensor } from '@ddp/autograd';
import type { Module, Parameter } from '@ddp/nn';
import { FSDPError } from './errors.js';

/**
 * The shards were cut from the parameters that required grad at fullyShard. A parameter that
 * requires grad now but is in no shard (unfrozen or replaced since) would never be stepped nor
 * averaged; one frozen since would still get a zero gradient in its shard, which momentum or
 * weight decay step. FSDP2 shards every parameter and follows requires_grad per parameter; here
 * the shards are cut from the trainable parameters once, so the trainable set is fixed at
 * fullyShard. Without grad (evaluation) nothing is reduced or stepped, so anything goes.
 */
export function checkTrainableSet(
  module: Module,
  units: readonly { flat: { params: readonly Tensor[] } | null }[],
  rank: number,
): void {
  if (!isGradEnabled()) return;
  const inShards = new Set(units.flatMap((u) => u.flat?.params ?? []));
  const named = module.namedParameters();
  const present = new Set(named.map(([, p]) => p));
  const problems = [
    ...named
      .filter(([, p]) => p.requiresGrad && !inShards.has(p))
      .map(([n]) => `${n} requires grad but is in no shard`),
    ...named.filter(([, p]) => !p.requiresGrad && inShards.has(p)).map(([n]) => `${n} is sharded but frozen`),
  ];
  const gone = [...inShards].filter((p) => !present.has(p as Parameter)).length;
  if (gone > 0) problems.push(`${gone} sharded parameter(s) no longer in the module`);
  if (problems.length === 0) return;
  throw new FSDPError(
    `rank ${rank}: ${problems.join('; ')}: the parameters requiring grad changed after ` +
      'fullyShard (unfrozen, frozen, replaced or added); call fullyShard after changing them',
  );
}
