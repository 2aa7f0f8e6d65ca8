import type { Tensor } from '@ddp/autograd';
import { checkOptionNames, tf } from '@ddp/tensor';
import { type GroupCheck, OptimizerError, type OptimizerStateDict } from './optimizer.js';

/**
 * The parameter each index of `sd` names in `groups` (the same layout: as many groups, each as
 * many parameters), after checking that every state entry names one and that each state tensor
 * has its parameter's shape. Nothing is changed; `error` builds the caller's typed error. ZeRO
 * checks a whole state dict with it on every rank before any rank loads its shard.
 */
export function stateDictParams<O>(
  sd: OptimizerStateDict<O>,
  groups: readonly { params: readonly Tensor[] }[],
  error: (message: string) => Error,
): Tensor[] {
  if (sd.paramGroups.length !== groups.length)
    throw error(`state dict has ${sd.paramGroups.length} parameter groups, the optimizer ${groups.length}`);
  const byIndex: Tensor[] = [];
  sd.paramGroups.forEach((saved, gi) => {
    const params = groups[gi].params;
    if (saved.params.length !== params.length) {
      throw error(
        `parameter group ${gi} has ${saved.params.length} parameters in the state dict, ` +
          `${params.length} in the optimizer`,
      );
    }
    saved.params.forEach((idx, j) => {
      byIndex[idx] = params[j];
    });
  });
  for (const [i, s] of sd.state) {
    const p = byIndex[i];
    if (!p) throw error(`state for parameter ${i}, which no group holds`);
    for (const [k, v] of Object.entries(s)) {
      if (v instanceof tf.Tensor && v.isDisposed)
        throw error(
          `state '${k}' of parameter ${i} was freed: stateDict() lends the optimizer's own tensors, which its ` +
            'dispose() or its steps free; clone them to keep a snapshot',
        );
      if (v instanceof tf.Tensor && (v.shape.length !== p.shape.length || v.shape.some((d, j) => d !== p.shape[j])))
        throw error(`state '${k}' of parameter ${i} has shape [${v.shape}], the parameter [${p.shape}]`);
    }
  }
  return byIndex;
}

/**
 * Refuses a state dict's group hyperparameters and state entries the optimizer (`kind`) does not
 * know, or values it cannot use, naming them. torch's names (`weight_decay`, `momentum_buffer`)
 * were kept beside ddp's and ignored: weight decay off and momentum restarted, silently; `lr: -1`
 * was taken. The values are checked merged over the optimizer's groups, as the load merges them.
 */
export function checkStateValues<O>(
  sd: OptimizerStateDict<O>,
  groups: readonly object[],
  check: GroupCheck<O>,
  kind: string,
): void {
  const error = (message: string) => new OptimizerError(message);
  for (const [gi, { params: _params, ...hyper }] of sd.paramGroups.entries()) {
    const where = `loadStateDict: ${kind} parameter group ${gi}`;
    // a scheduler's initialLr travels with the group, as torch's initial_lr
    checkOptionNames(where, hyper, [...check.names, 'initialLr'], error);
    const { params: _own, ...current } = groups[gi] as { params?: unknown };
    check.values({ ...current, ...hyper } as unknown as O, where);
  }
  for (const [i, s] of sd.state) {
    const unknown = Object.keys(s).filter((k) => !check.state.includes(k));
    if (unknown.length > 0)
      throw error(
        `loadStateDict: the state of parameter ${i} holds ${unknown.join(', ')}, which ${kind} does not keep ` +
          `(its state: ${check.state.join(', ')}; a state dict of torch's names is not ddp's)`,
      );
  }
}
