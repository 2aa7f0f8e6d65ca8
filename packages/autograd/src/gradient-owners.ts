// Which live wrapper reduces each parameter's gradient across ranks (DistributedDataParallel,
// DataParallelNaive, ZeRO stage 2): one at a time. Two wrappers' hooks on one gradient reduced it
// twice (DDP twice: wrong averages on every rank alike), or one freed it under the other (ZeRO
// stage 2 inside DDP: an untyped TypeError from the bucket's copy).
import type { Tensor } from './tensor.js';

const owners = new WeakMap<Tensor, { owner: object; who: string }>();

/**
 * Takes `params` for `owner` (`who` names it in errors), or raises `error(message)` naming those
 * another live wrapper holds and that wrapper.
 */
export function claimGradientReduction(
  owner: object,
  params: readonly { name: string; param: Tensor }[],
  who: string,
  error: (message: string) => Error,
): void {
  const taken = params.filter(({ param }) => owners.has(param) && owners.get(param)?.owner !== owner);
  if (taken.length > 0) {
    const holder = owners.get(taken[0].param)?.who;
    const zero = [who, holder].some((w) => w?.startsWith('ZeroRedundancyOptimizer'));
    throw error(
      `${who}: ${taken.map(({ name }) => name).join(', ')} already belong to another live wrapper (${holder}), ` +
        'whose hooks would reduce their gradients too; ' +
        (zero
          ? "ZeRO stage 2 reduces gradients itself: use stage 1 under DDP or a pipeline's dpGroup, or stage 2 alone"
          : 'call dispose() on it first (to wrap a module again), or wrap one module holding every part that ' +
            'shares them (a backbone and its heads) once'),
    );
  }
  for (const { param } of params) owners.set(param, { owner, who });
}

/** Gives `owner`'s parameters back (its dispose). */
export function releaseGradientReduction(owner: object, params: readonly { param: Tensor }[]): void {
  for (const { param } of params) if (owners.get(param)?.owner === owner) owners.delete(param);
}

/** The live wrapper that reduces `param`'s gradient across ranks (its `who`), or null. */
export function gradientReducer(param: Tensor): string | null {
  return owners.get(param)?.who ?? null;
}
