import { destroyProcessGroup, initProcessGroup } from '../index.js';

/**
 * `await pg.allReduce(buf)` (torch's blocking dist.all_reduce, as JavaScript reads it) and the other
 * collectives awaited as they are, each buffer read right after the await: small (the main thread's
 * fast path) and large (the comm thread). Prints what each read saw.
 */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const seen: Record<string, number[]> = {};
for (const n of [4, 1 << 20]) {
  const sum = new Float32Array(n).fill(pg.rank + 1);
  await pg.allReduce(sum);
  const root = new Float32Array(n).fill(pg.rank === 0 ? 7 : -1);
  await pg.broadcast(root, { src: 0 });
  const gathered = new Float32Array(n * pg.size);
  await pg.allGatherInto(gathered, new Float32Array(n).fill(pg.rank + 1));
  seen[`${n}`] = [sum[0], sum[n - 1], root[0], root[n - 1], gathered[0], gathered[gathered.length - 1]];
}
await pg.barrier();
console.log(`RESULT ${JSON.stringify(seen)}`);
await destroyProcessGroup();
