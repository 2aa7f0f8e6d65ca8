import type { ProcessGroup } from '@ddp/comm';
import { BatchNorm, type Module } from '@ddp/nn';
import { SyncBatchNorm } from './sync-batch-norm.js';

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
export function convertSyncBatchnorm<M extends Module>(
  module: M,
  processGroup: ProcessGroup | null = null,
): M | SyncBatchNorm {
  if (module instanceof BatchNorm && !(module instanceof SyncBatchNorm)) {
    const sync = toSync(module, processGroup);
    module.dispose();
    return sync;
  }
  for (const [name, child] of [...module.namedChildren()]) {
    const converted = convertSyncBatchnorm(child, processGroup);
    if (converted !== child) module.replaceModule(name, converted);
  }
  return module;
}
