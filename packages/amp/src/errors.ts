import type { ScalableOptimizer } from './grad-scaler-options.js';

/** GradScaler used out of order (unscale_ or step twice before update) or given bad options or state. */
export class GradScalerError extends Error {
  override name = 'GradScalerError';
}

/**
 * A freed parameter has no gradient and was skipped: over an FSDP model's own (resharded) parameters
 * every one was, and the error said no backward had run (probe BR). Names it, as the optimizer's step does.
 */
export function refuseFreed(optimizer: ScalableOptimizer): void {
  optimizer.paramGroups.forEach((group, g) => {
    const i = group.params.findIndex((p) => p.isDisposed);
    if (i < 0) return;
    const freed = group.params[i].freedBy;
    const why =
      freed !== null && freed !== 'dispose()'
        ? `is freed: ${freed}`
        : 'was disposed (its layer replaced or disposed after the optimizer was made): take model.parameters() again';
    throw new GradScalerError(`unscale_(): parameter ${i} of group ${g} ${why}`);
  });
}
