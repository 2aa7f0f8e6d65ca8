export { clipLoss, clipLossFullMatrix } from './clip-loss.js';
export { ContrastiveError } from './errors.js';
export { allGatherLocalGrad, allGatherRows, allGatherWithGrad, type GatheredRows } from './gather.js';
export { ntXentLoss } from './ntxent.js';
export { ringExchange } from './ring.js';
export { clampLogitScale_, logitScaleFromLog, MAX_LOGIT_SCALE } from './scale.js';
export { sigLipLoss } from './siglip.js';
export type { LossOptions } from './world.js';
