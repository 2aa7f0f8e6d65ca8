import { destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';

/**
 * allGatherInto into shared memory and reduceScatter with `overwriteInput` on shared memory run
 * on the caller's arrays (no staging): small (main thread) and large (comm thread), at an offset
 * into a larger shared buffer. Prints one RESULT line: the cases whose values were wrong.
 */
const pg = await initProcessGroup({ timeoutMs: 30_000 });
const { rank, size } = pg;
const wrong: string[] = [];
const check = (what: string, got: Float32Array, want: (i: number) => number) => {
  const i = got.findIndex((v, j) => v !== want(j));
  if (i >= 0) wrong.push(`${what}: [${i}] = ${got[i]}, expected ${want(i)}`);
};
const value = (r: number, i: number) => r * 1000 + (i % 997);
/** `n` floats of shared memory starting 3 floats into a larger buffer. */
const sharedAt = (n: number) => sharedArray(Float32Array, n + 5).subarray(3, 3 + n);

for (const n of [4, 100_000]) {
  const own = Float32Array.from({ length: n }, (_, i) => value(rank, i));
  const gathered = sharedAt(n * size);
  await pg.allGatherInto(gathered, own).wait();
  check(`allGatherInto ×${n}`, gathered, (i) => value(Math.floor(i / n), i % n));

  const inSlot = sharedAt(n * size);
  inSlot.subarray(rank * n, (rank + 1) * n).set(own);
  await pg.allGatherInto(inSlot, inSlot.subarray(rank * n, (rank + 1) * n)).wait();
  check(`allGatherInto from its own slot ×${n}`, inSlot, (i) => value(Math.floor(i / n), i % n));

  const sum = (i: number) => Array.from({ length: size }, (_, r) => value(r, i + rank * n)).reduce((a, b) => a + b, 0);
  const input = () => {
    const a = sharedAt(n * size);
    a.set(Float32Array.from({ length: n * size }, (_, i) => value(rank, i)));
    return a;
  };
  const scratch = input();
  const out = new Float32Array(n);
  await pg.reduceScatter(out, scratch, { overwriteInput: true }).wait();
  check(`reduceScatter overwriteInput ×${n}`, out, sum);
  check(`reduceScatter overwriteInput reduced in place ×${n}`, scratch.subarray(rank * n, (rank + 1) * n), sum);

  const intoChunk = input();
  const chunk = intoChunk.subarray(rank * n, (rank + 1) * n);
  await pg.reduceScatter(chunk, intoChunk, { overwriteInput: true }).wait();
  check(`reduceScatter into its own chunk ×${n}`, chunk, sum);

  const kept = input();
  await pg.reduceScatter(new Float32Array(n), kept).wait();
  check(`reduceScatter leaves a shared input alone without overwriteInput ×${n}`, kept, (i) => value(rank, i));

  // FSDP's pattern: a reduce-scatter in place, then an all-gather of its output, not awaited in between
  const again = input();
  const mine = again.subarray(rank * n, (rank + 1) * n);
  pg.reduceScatter(mine, again, { overwriteInput: true });
  await pg.allGatherInto(again, mine).wait();
  const total = (i: number) => Array.from({ length: size }, (_, r) => value(r, i)).reduce((a, b) => a + b, 0);
  check(`reduceScatter then allGatherInto in place ×${n}`, again, total);
}
console.log(`RESULT ${JSON.stringify(wrong)}`);
await destroyProcessGroup();
