import { destroyProcessGroup, initProcessGroup, sharedArray } from '@ddp/comm';
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const bytes = Number(process.env.BYTES ?? 4096);
const buf = sharedArray(Float32Array, bytes / 4).fill(1);
const iters = Number(process.env.ITERS ?? 2000);
for (let i = 0; i < Math.min(200, iters); i++) await pg.allReduce(buf).wait();
for (let rep = 0; rep < 3; rep++) {
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) await pg.allReduce(buf).wait();
  if (pg.rank === 0) console.log(`${bytes} B: ${((performance.now() - t0) / iters * 1000).toFixed(1)} us`);
}
await destroyProcessGroup();
