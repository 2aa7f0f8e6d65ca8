export { type AutocastDtype, type AutocastOptions, autocast, autocastDtype, roundToPrecision } from '@ddp/autograd';
export { GradScalerError } from './errors.js';
export { GradScaler, type GradScalerOptions, type GradScalerStateDict, type ScalableOptimizer } from './grad-scaler.js';
