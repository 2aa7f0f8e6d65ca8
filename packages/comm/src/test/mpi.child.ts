import { destroyProcessGroup, initProcessGroup, readLaunchEnv } from '../index.js';

/** Started by mpirun: forms the world from OMPI_COMM_WORLD_* alone and checks an allReduce. */
const env = readLaunchEnv();
const pg = await initProcessGroup({ timeoutMs: 30_000 });
const a = new Float64Array([pg.rank + 1, 2 * pg.rank]);
await pg.allReduce(a).wait();
const n = pg.size;
const ok = a[0] === (n * (n + 1)) / 2 && a[1] === n * (n - 1);
console.log(`RESULT ${JSON.stringify({ rank: pg.rank, size: n, source: env.source, ok })}`);
await destroyProcessGroup();
