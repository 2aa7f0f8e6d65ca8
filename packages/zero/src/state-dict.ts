import type { Tensor } from '@ddp/autograd';
import type { ProcessGroup } from '@ddp/comm';
import type { Optimizer, OptimizerStateDict, ParamGroup, ParamState } from '@ddp/nn';
import { ZeroError } from './errors.js';
import { packState, unpackState } from './state-codec.js';

/**
 * Gathers each rank's `[global index, state]` entries on group rank `to`; returns the
 * union there (new tensors, owned by the caller) and null elsewhere.
 */
export async function gatherStateDict(
  group: ProcessGroup,
  entries: [number, ParamState][],
  to: number,
): Promise<Map<number, ParamState> | null> {
  if (!Number.isInteger(to) || to < 0 || to >= group.size)
    throw new ZeroError(`consolidateStateDict: rank ${to} is not in a group of ${group.size}`);
  const { meta, values } = packState(entries);
  const metaWork = group.gather(meta, { dst: to });
  const valueWork = group.gather(values, { dst: to });
  const [metas, valueLists] = [await metaWork.wait(), await valueWork.wait()];
  if (metas === null || valueLists === null) return null;
  const state = new Map<number, ParamState>();
  metas.forEach((m, r) => {
    for (const [i, s] of unpackState(m as Int32Array, valueLists[r] as Float32Array)) state.set(i, s);
  });
  return state;
}

/**
 * The part of a whole state dict that belongs to this rank's local optimizer, re-indexed in
 * the local optimizer's own layout; null when the rank owns no parameter. Checks the groups
 * against the global ones first.
 */
export function shardStateDict<O extends { lr: number }>(
  sd: OptimizerStateDict<O>,
  globalGroups: ParamGroup<O>[],
  local: Optimizer<O> | null,
  localGroupOf: number[],
): OptimizerStateDict<O> | null {
  if (sd.paramGroups.length !== globalGroups.length) {
    throw new ZeroError(
      `state dict has ${sd.paramGroups.length} parameter groups, the optimizer ${globalGroups.length}`,
    );
  }
  const byIndex = new Map<number, Tensor>();
  sd.paramGroups.forEach((saved, g) => {
    const params = globalGroups[g].params;
    if (saved.params.length !== params.length) {
      throw new ZeroError(
        `parameter group ${g} has ${saved.params.length} parameters in the state dict, ${params.length} in ` +
          `the optimizer`,
      );
    }
    for (const [j, idx] of saved.params.entries()) byIndex.set(idx, params[j]);
  });
  if (!local) return null;
  const localIndex = new Map(local.paramGroups.flatMap((g) => g.params).map((p, i) => [p, i]));
  const state = new Map<number, ParamState>();
  for (const [i, s] of sd.state) {
    const p = byIndex.get(i);
    if (!p) throw new ZeroError(`state for parameter ${i}, which no group holds`);
    const li = localIndex.get(p);
    if (li !== undefined) state.set(li, s);
  }
  const paramGroups = local.paramGroups.map(({ params, ...hyper }, i) => {
    const { params: _saved, ...savedHyper } = sd.paramGroups[localGroupOf[i]];
    return { ...(hyper as unknown as O), ...savedHyper, params: params.map((p) => localIndex.get(p)!) };
  });
  return { state, paramGroups };
}
