import { checkGroup, type ProcessGroup } from '@ddp/comm';
import { BatchNorm, type Module } from '@ddp/nn';
import { SyncBatchNorm } from './sync-batch-norm.js';

/**
 * SyncBatchNorm.convert_sync_batchnorm: every BatchNorm in `module` (which may itself be one)
 * is replaced by a SyncBatchNorm with the same options that takes over its parameters and
 * buffers (the same tensors, as torch's: an optimizer built before still trains them).
 * Returns the module to use (a new one only when `module` itself was a BatchNorm). Parents
 * must call the new layers' `forwardAsync` in training.
 */
export function convertSyncBatchnorm<M extends Module>(
  module: M,
  processGroup?: ProcessGroup | null,
): M | SyncBatchNorm {
  checkGroup(processGroup, 'convertSyncBatchnorm');
  if (module instanceof BatchNorm && !(module instanceof SyncBatchNorm)) {
    return SyncBatchNorm.fromBatchNorm(module, processGroup);
  }
  for (const [name, child] of [...module.namedChildren()]) {
    const converted = convertSyncBatchnorm(child, processGroup);
    if (converted !== child) module.replaceModule(name, converted);
  }
  return module;
}
