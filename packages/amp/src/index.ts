export { autocast, autocastDtype, roundToPrecision, type AutocastDtype, type AutocastOptions } from '@ddp/autograd';
export { GradScaler, type GradScalerOptions, type GradScalerStateDict, type ScalableOptimizer } from './grad-scaler.js';
export { GradScalerError } from './errors.js';
