import { destroyProcessGroup, initProcessGroup } from '../index.js';

const pg = await initProcessGroup({ timeoutMs: 20_000 });
const a = new Float32Array([pg.rank + 1, 10 * (pg.rank + 1)]);
await pg.allReduce(a).wait();
console.log(`RESULT ${JSON.stringify({ rank: pg.rank, sum: [...a] })}`);
await destroyProcessGroup();
