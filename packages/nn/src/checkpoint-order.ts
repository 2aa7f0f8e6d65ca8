/**
 * Optimizer state is kept by position, a model's by name: a model or optimizer whose parameters
 * come in another order than when saved (a refactor, groups built otherwise) would take another
 * parameter's moments silently wherever the shapes agree. Checkpoints record each position's
 * name and compare it on load (nn's checkpoints and @ddp/zero's sharded ones).
 */
import type { Tensor } from '@ddp/autograd';
import type { Module } from './module.js';

/** The model's name of each parameter of `groups`, in the optimizer's order (null: not the model's). */
export function optimizerParamNames(model: Module, groups: readonly { params: Tensor[] }[]): (string | null)[] {
  const names = new Map<Tensor, string>(model.namedParameters().map(([name, p]) => [p, name]));
  return groups.flatMap((g) => g.params.map((p) => names.get(p) ?? null));
}

/**
 * Why the optimizer positions `now` name other parameters than `saved` did (first three), or
 * null when every position named on both sides names the same one.
 */
export function parameterOrderChange(saved: readonly (string | null)[] | undefined, now: (string | null)[]) {
  const moved = (saved ?? [])
    .map((name, i) => ({ i, was: name, is: now[i] ?? null }))
    .filter(({ was, is }) => was !== null && is !== null && was !== is);
  if (moved.length === 0) return null;
  const list = moved.slice(0, 3).map(({ i, was, is }) => `parameter ${i} is '${is}', was '${was}'`);
  return (
    `the optimizer's parameters are in another order than when saved (${list.join('; ')}` +
    `${moved.length > 3 ? `; ${moved.length - 3} more` : ''}): its state would go to other parameters`
  );
}
