// @ddp/launch/testing: start a world of real rank processes from a test and read what each rank
// printed. runWorld goes through launch() (the environment ddp-run gives); spawnRanks and runMpirun
// start the ranks themselves, for fault tests and for Open MPI.
export { findFreePort } from './port.js';
export { launchOptionsFor, nodeArgsFor } from './testing/compiled.js';
export { type MpirunOptions, mpirunMissing, runMpirun } from './testing/mpirun.js';
export { RankLines } from './testing/rank-lines.js';
export {
  explainWorld,
  type RankRun,
  type RunWorldOptions,
  runWorld,
  type WorldRun,
  WorldRunError,
} from './testing/run-world.js';
export { explain, type RankOutcome, type SpawnRanksOptions, spawnRanks } from './testing/spawn-ranks.js';
