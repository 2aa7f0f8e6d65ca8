import type { Parameter } from '@ddp/nn';
import { DDPUsageError } from './errors.js';

/** The live wrapper (DistributedDataParallel, DataParallelNaive) whose hooks reduce each parameter's gradient. */
const owners = new WeakMap<Parameter, object>();

/**
 * Takes `params` for `owner`, or refuses those another live wrapper holds: both wrappers' hooks
 * reduced the same gradient, in place at once for large ones, and the averages came out wrong on
 * every rank alike (a shared backbone wrapped in two DDPs; a module wrapped again, as the
 * requiresGrad error advised, without releasing the first).
 */
export function claimParameters(owner: object, params: readonly { name: string; param: Parameter }[], who: string) {
  const taken = params.filter(({ param }) => owners.has(param) && owners.get(param) !== owner).map(({ name }) => name);
  if (taken.length > 0) {
    throw new DDPUsageError(
      `${who}: ${taken.join(', ')} already belong to another live wrapper, whose hooks would reduce their ` +
        'gradients too; call dispose() on it first (to wrap a module again), or wrap one module holding every ' +
        'part that shares them (a backbone and its heads) once',
    );
  }
  for (const { param } of params) owners.set(param, owner);
}

/** Gives `owner`'s parameters back (dispose). */
export function releaseParameters(owner: object, params: readonly { param: Parameter }[]): void {
  for (const { param } of params) if (owners.get(param) === owner) owners.delete(param);
}
