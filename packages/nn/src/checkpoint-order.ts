/**
 * Optimizer state is kept by position, a model's by name: a model or optimizer whose parameters
 * come in another order than when saved (a refactor, groups built otherwise) would take another
 * parameter's moments silently wherever the shapes agree. Checkpoints write the state by position,
 * record each position's name and compare it on load (nn's checkpoints and @ddp/zero's sharded ones).
 */
import { gradientShardGroups, type Tensor } from '@ddp/autograd';
import { tf } from '@ddp/tensor';
import { CheckpointError } from './checkpoint-errors.js';
import type { Module } from './module.js';
import type { ParamState } from './optim/optimizer.js';
import { type SafeTensor, toSafeTensor } from './safetensors.js';

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

/**
 * Refuses an optimizer stepping a parameter that is not the model's: the checkpoint held its state
 * but not its value, so a resumed run stepped it on from its initial value (probe AE); FSDP's
 * shards of flattened units differ on every rank besides, and one rank's file loaded into all.
 */
export function refuseParamsOutsideModel(
  where: string,
  model: Module,
  groups: readonly { params: Tensor[] }[],
  error: (message: string) => Error = (message) => new CheckpointError(message),
): void {
  const index = optimizerParamNames(model, groups).indexOf(null);
  if (index < 0) return;
  if (gradientShardGroups(groups.flatMap((g) => g.params)[index]).length > 0)
    throw error(
      `${where}: optimizer parameter ${index} is a shard of a flattened unit, no parameter of the model (FSDP): ` +
        "its state differs on every rank, and one rank's file would load into all. Save with saveFSDPCheckpoint",
    );
  throw error(
    `${where}: optimizer parameter ${index} is no parameter of the model: the checkpoint would hold its state ` +
      'but not its value, and a resumed run would step it on from its initial value. Register it in the model ' +
      "(registerParameter), or give the optimizer the model's parameters only",
  );
}

/**
 * Optimizer state by parameter index, copied for a file: tensors as `state.<index>.<key>` (each a
 * copy of its values) and the scalars (Adam's step) apart. ZeRO's sharded checkpoints use it too.
 */
export function optimizerStateTensors(state: Iterable<[number, ParamState]>) {
  const tensors = new Map<string, SafeTensor>();
  const scalars: Record<string, Record<string, number>> = {};
  for (const [i, paramState] of state) {
    for (const [key, v] of Object.entries(paramState)) {
      if (v instanceof tf.Tensor) tensors.set(`state.${i}.${key}`, toSafeTensor(v));
      else {
        scalars[i] ??= {};
        scalars[i][key] = v;
      }
    }
  }
  return { tensors, scalars };
}
