import { freedParameterProblem } from '@ddp/autograd';
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
    const problem = freedParameterProblem(
      group.params,
      'the optimizer was built',
      (i) => `parameter ${i} of group ${g}`,
    );
    if (problem !== null) throw new GradScalerError(`unscale_(): ${problem}`);
  });
}
