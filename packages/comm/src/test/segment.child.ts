import { destroyProcessGroup, initProcessGroup } from '../index.js';
import { firstDiff, generate, reference } from './reference.js';

/**
 * One all-reduce whose ring chunks (18 MiB at 2 ranks) exceed the frame limit, under the segment size
 * DDP_SEGMENT_BYTES sets. Prints RESULT { firstDiff } (-1: right).
 */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const n = 9 * 2 ** 20;
const buf = generate('float32', pg.rank, n, 1);
await pg.allReduce(buf).wait();
const ranks = Array.from({ length: pg.size }, (_, r) => r);
console.log(`RESULT ${JSON.stringify({ firstDiff: firstDiff(buf, reference('float32', 'sum', ranks, n, 1)) })}`);
await destroyProcessGroup();
