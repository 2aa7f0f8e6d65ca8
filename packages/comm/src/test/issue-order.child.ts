import { type CommArray, destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';

/**
 * Ops issued on one array without waiting in between: the later op reads the earlier op's
 * result (PyTorch's stream order), on plain and shared arrays, small (main thread) and large
 * (comm thread), and across the two threads (broadcast runs on the comm thread, a small
 * allReduce on the main one). Prints each case's first and last element and whether all agree.
 */
const pg = await initProcessGroup({ timeoutMs: 30_000 });
const N = pg.size;
const summary = (a: CommArray) => ({ first: a[0], last: a[a.length - 1], uniform: a.every((v) => v === a[0]) });
const plain = (n: number, v: number) => new Float32Array(n).fill(v);
const shared = (n: number, v: number) => sharedArray(Float32Array, n).fill(v);
const out: Record<string, unknown> = {};

for (const n of [4, 100_000]) {
  for (const [kind, make] of [
    ['plain', plain],
    ['shared', shared],
  ] as const) {
    const twice = make(n, pg.rank + 1);
    pg.allReduce(twice);
    await pg.allReduce(twice).wait();
    out[`allReduce twice ${kind}×${n}`] = summary(twice);

    const bc = make(n, pg.rank === 0 ? 5 : 0);
    pg.broadcast(bc, { src: 0 });
    await pg.allReduce(bc).wait();
    out[`broadcast then allReduce ${kind}×${n}`] = summary(bc);
  }
  const chunk = plain(n, 0);
  pg.reduceScatter(chunk, plain(n * N, pg.rank + 1));
  const gathered = plain(n * N, 0);
  await pg.allGatherInto(gathered, chunk).wait();
  out[`reduceScatter then allGatherInto ×${n}`] = summary(gathered);
}
console.log(`RESULT ${JSON.stringify(out)}`);

// destroyed while the second op waits for the first: it fails (a thread already closed would never answer)
const held = plain(100_000, 1);
pg.allReduce(held);
const second = pg.allReduce(held).promise.then(
  () => 'completed',
  (e: Error) => e.name,
);
await destroyProcessGroup();
const late = new Promise((resolve) => setTimeout(() => resolve('never settled'), 10_000).unref());
console.log(`RESULT ${JSON.stringify({ destroyed: await Promise.race([second, late]) })}`);
