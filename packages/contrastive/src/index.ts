export { allGatherWithGrad, allGatherRows, allGatherLocalGrad, type GatheredRows } from './gather.js';
export { clipLoss, clipLossFullMatrix } from './clip-loss.js';
export { ntXentLoss } from './ntxent.js';
export { sigLipLoss } from './siglip.js';
export { ringExchange } from './ring.js';
export { logitScaleFromLog, clampLogitScale_, MAX_LOGIT_SCALE } from './scale.js';
export type { LossOptions } from './world.js';
export { ContrastiveError } from './errors.js';
