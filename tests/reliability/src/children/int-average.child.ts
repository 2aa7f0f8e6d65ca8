// AVG of int32 values whose sum leaves int32 (3 ranks, 2^30 + rank): small (direct exchange)
// and large (ring) counts. Prints the first element of each and whether all elements agree.
import { destroyProcessGroup, initProcessGroup, ReduceOp } from '@ddp/comm';

const group = await initProcessGroup({ timeoutMs: 20_000 });
const out: Record<string, { first: number; uniform: boolean }> = {};
for (const n of [7, 70_000]) {
  const a = new Int32Array(n).fill(2 ** 30 + group.rank);
  await group.allReduce(a, { op: ReduceOp.AVG }).wait();
  out[`allReduce ${n}`] = { first: a[0], uniform: a.every((v) => v === a[0]) };
}
console.log(`RESULT ${JSON.stringify(out)}`);
await destroyProcessGroup();
