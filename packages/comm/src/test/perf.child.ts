import { destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';

/** Times allReduce per size: args = sizes in bytes; prints RESULT {bytes, us}. */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const iters = Number(process.env.PERF_ITERS ?? 10);
for (const arg of process.argv.slice(2)) {
  const bytes = Number(arg);
  const buf = process.env.PERF_SHARED ? sharedArray(Float32Array, bytes / 4).fill(1) : new Float32Array(bytes / 4).fill(1);
  await pg.allReduce(buf).wait();
  await pg.barrier().wait();
  const n = bytes >= 1 << 24 ? Math.max(3, iters / 3) : bytes <= 65536 ? iters * 20 : iters;
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await pg.allReduce(buf).wait();
  const us = Number(process.hrtime.bigint() - t) / 1000 / n;
  if (pg.rank === 0) console.log(`RESULT ${JSON.stringify({ bytes, us, busGBs: ((2 * (pg.size - 1)) / pg.size) * bytes / us / 1000 })}`);
}
await destroyProcessGroup();
