import type { Dtype, HalfDtype, ReduceOp } from '../dtypes.js';
import { destroyProcessGroup, getWireStats, initProcessGroup } from '../index.js';
import { firstDiff, generate, reference } from './reference.js';

/**
 * Bytes each all-reduce puts on the wire (getWireStats) and whether its result is right, for
 * float32 and the 16-bit dtypes, on the direct (small) and ring (large) paths.
 * Prints RESULT { "<path>/<dtype>/<op>": { sent, ok } }.
 */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const ranks = Array.from({ length: pg.size }, (_, r) => r);
const out: Record<string, { sent: number; ok: boolean }> = {};
let salt = 0;
for (const [path, n] of [
  ['direct', 1024],
  ['ring', 1 << 18],
] as const) {
  for (const d of ['float32', 'float16', 'bfloat16'] as Dtype[]) {
    for (const op of ['sum', 'avg', 'max'] as ReduceOp[]) {
      const buf = generate(d, pg.rank, n, ++salt);
      await pg.barrier().wait();
      const before = getWireStats().bytesSent;
      await pg.allReduce(buf, { op, ...(d === 'float32' ? {} : { dtype: d as HalfDtype }) }).wait();
      out[`${path}/${d}/${op}`] = {
        sent: getWireStats().bytesSent - before,
        ok: firstDiff(buf, reference(d, op, ranks, n, salt)) === -1,
      };
    }
  }
}
console.log(`RESULT ${JSON.stringify(out)}`);
await destroyProcessGroup();
