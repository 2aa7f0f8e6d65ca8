export { LaunchConfigError } from './errors.js';
export { type LaunchControls, type LaunchResult, launch } from './launch.js';
export { type LaunchOptions, type LaunchPlan, planLaunch, rankEnv, type WorldStartInfo } from './options.js';
export { findFreePort } from './port.js';
export { describeExit, failureSummary, lastErrorLines } from './summary.js';
export type { RankExit, WorldResult } from './world.js';
