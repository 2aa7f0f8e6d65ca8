// Test-only: one rank; runs the scenarios named on the command line in order and prints
// `RESULT <name> <json>` for each (a thrown error becomes { error }).
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { coreScenarios } from './scenarios-core.js';
import { finiteScenarios } from './scenarios-finite.js';
import { hookScenarios } from './scenarios-hooks.js';
import { joinScenarios } from './scenarios-join.js';
import { modelScenarios } from './scenarios-models.js';
import { storageScenarios } from './scenarios-storage.js';

const scenarios = {
  ...coreScenarios,
  ...finiteScenarios,
  ...hookScenarios,
  ...joinScenarios,
  ...modelScenarios,
  ...storageScenarios,
};
const group = await initProcessGroup({ timeoutMs: Number(process.env.DDP_TIMEOUT_MS ?? 30_000) });
for (const name of process.argv.slice(2)) {
  const run = scenarios[name as keyof typeof scenarios];
  let result: Record<string, unknown>;
  try {
    if (!run) throw new Error(`no scenario ${name}`);
    result = await run(group);
  } catch (e) {
    result = { error: { name: (e as Error).name, message: (e as Error).message } };
  }
  console.log(`RESULT ${name} ${JSON.stringify(result)}`);
}
await destroyProcessGroup();
