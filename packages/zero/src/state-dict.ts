import type { ProcessGroup } from '@ddp/comm';
import { type Optimizer, type OptimizerStateDict, type ParamGroup, type ParamState, stateDictParams } from '@ddp/nn';
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
  kind: string,
): OptimizerStateDict<O> | null {
  if (sd.kind !== undefined && sd.kind !== kind) throw new ZeroError(`state dict of ${sd.kind}, loaded into ${kind}`);
  // the whole dict on every rank, so a layout that fits nowhere fails everywhere, before anything loads
  const byIndex = stateDictParams(sd, globalGroups, (m) => new ZeroError(m));
  if (!local) return null;
  const localIndex = new Map(local.paramGroups.flatMap((g) => g.params).map((p, i) => [p, i]));
  const state = new Map<number, ParamState>();
  for (const [i, s] of sd.state) {
    const li = localIndex.get(byIndex[i]);
    if (li !== undefined) state.set(li, s);
  }
  const paramGroups = local.paramGroups.map(({ params, ...hyper }, i) => {
    const { params: _saved, ...savedHyper } = sd.paramGroups[localGroupOf[i]];
    return { ...(hyper as unknown as O), ...savedHyper, params: params.map((p) => localIndex.get(p)!) };
  });
  return { state, paramGroups };
}
