// Test-only: one rank of collectives.multiprocess.test.ts, started with the torchrun environment.
import { destroyProcessGroup, initProcessGroup } from '@ddp/comm';
import { runCases } from './collective-cases.js';

const group = await initProcessGroup({ timeoutMs: 30_000 });
const grads = await runCases(group);
console.log(`RESULT ${JSON.stringify({ rank: group.rank, grads })}`);
await destroyProcessGroup();
