import type { ProcessGroup } from '@ddp/comm';
import { BatchNorm, type Module } from '@ddp/nn';
import { SyncBatchNorm } from './sync-batch-norm.js';

/**
 * Puts `replacement` where `parent` holds `old`: nn's Module has no public way to swap a
 * registered child (PyTorch's add_module/setattr), so this updates its child map and the
 * fields and arrays (ModuleList's items) that point at `old`.
 */
function replaceChild(parent: Module, old: Module, replacement: Module): void {
  const slots = parent as unknown as Record<string, unknown> & { children_: Map<string, Module | null> };
  for (const [name, child] of slots.children_) if (child === old) slots.children_.set(name, replacement);
  for (const key of Object.keys(slots)) {
    const value = slots[key];
    if (value === old) slots[key] = replacement;
    else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) if (v === old) value[i] = replacement;
    }
  }
}

function toSync(bn: BatchNorm, processGroup: ProcessGroup | null): SyncBatchNorm {
  const sync = new SyncBatchNorm(bn.numFeatures, {
    eps: bn.eps,
    momentum: bn.momentum,
    affine: bn.weight !== null,
    trackRunningStats: bn.trackRunningStats,
    processGroup,
  });
  sync.loadStateDict(bn.stateDict());
  if (bn.weight && sync.weight) sync.weight.requiresGrad_(bn.weight.requiresGrad);
  if (bn.bias && sync.bias) sync.bias.requiresGrad_(bn.bias.requiresGrad);
  sync.train(bn.training);
  return sync;
}

/**
 * SyncBatchNorm.convert_sync_batchnorm: every BatchNorm in `module` (which may itself be one)
 * is replaced by a SyncBatchNorm with the same options, weights, running statistics and
 * num_batches_tracked; the replaced modules are disposed. Returns the module to use (a new
 * one only when `module` itself was a BatchNorm). Parents must call the new layers'
 * `forwardAsync` in training.
 */
export function convertSyncBatchnorm<M extends Module>(module: M, processGroup: ProcessGroup | null = null): M | SyncBatchNorm {
  if (module instanceof BatchNorm && !(module instanceof SyncBatchNorm)) {
    const sync = toSync(module, processGroup);
    module.dispose();
    return sync;
  }
  for (const child of module.children()) {
    const converted = convertSyncBatchnorm(child, processGroup);
    if (converted !== child) replaceChild(module, child, converted);
  }
  return module;
}
