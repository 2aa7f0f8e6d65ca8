import { setTimeout as sleep } from 'node:timers/promises';
import { CommError, destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';

/**
 * The fast path of small allReduces (op-dispatcher.ts, executor runNow), one scenario per mode
 * (argv[2]); each rank prints RESULT lines.
 *   sync     – 200 awaited 4 KiB allReduces: how many were already done when allReduce returned
 *   mixed    – rank 0 awaits each op (fast path), the others issue them all at once (queued):
 *              small and large allReduces, a broadcast, float16 and int32 MAX between; then
 *              every rank issues a large and two small allReduces at once
 *   mismatch – rank 0 all-reduces 8 elements, the others 9 (both small)
 *   other-op – rank 0 all-reduces 8 elements (the exchange), the others broadcast them (queued)
 *   timeout  – the last rank sleeps instead of calling a small allReduce
 */
const mode = process.argv[2];
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
const pg = await initProcessGroup({ timeoutMs: mode === 'timeout' ? 2000 : 30_000 });
const { rank, size } = pg;
const last = size - 1;

async function attempt(what: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    report({ phase: what, name: 'ok', value: await fn() });
  } catch (e) {
    const err = e instanceof CommError ? e : null;
    report({ phase: what, name: err?.name ?? 'other', message: String(err?.message ?? e), ranks: err?.ranks });
  }
}

/** Issues every op; rank 0 waits for each before the next, the others for all at the end; order of completion kept. */
async function mixed(): Promise<unknown> {
  const n = 1024;
  // shared, so a queued op reads it when it runs (a plain array is captured when issued)
  const small = sharedArray(Float32Array, n);
  for (let i = 0; i < n; i++) small[i] = rank * 1000 + i;
  const plain = new Float32Array(7).fill(rank + 0.5);
  const large = new Float32Array(300_000).fill(rank + 1);
  const half = new Uint16Array(5).fill(0x3c00 + rank); // float16 1.0, 1.00098, …
  const ints = new Int32Array(9).map((_, i) => (i === rank ? 100 + rank : -rank));
  const root = new Float64Array(3).fill(rank === 1 ? 42 : 0);
  const issue = [
    () => pg.allReduce(small),
    () => pg.allReduce(large),
    () => pg.allReduce(plain, { op: 'avg' }),
    () => pg.broadcast(root, { src: 1 }),
    () => pg.allReduce(half, { dtype: 'float16' }),
    () => pg.allReduce(ints, { op: 'max' }),
    () => pg.allReduce(small),
  ];
  const order: number[] = [];
  const pending: Promise<void>[] = [];
  for (const [i, start] of issue.entries()) {
    const p = start().promise.then(() => {
      order.push(i);
    });
    if (rank === 0) await p;
    else pending.push(p);
  }
  await Promise.all(pending);
  // every rank issues at once: a large allReduce in flight, then two small ones on one array
  const twice = sharedArray(Float32Array, 16).fill(1);
  const burst: number[] = [];
  const works = [pg.allReduce(large), pg.allReduce(twice), pg.allReduce(twice)];
  await Promise.all(works.map((w, i) => w.promise.then(() => burst.push(i))));
  return {
    burst: [...burst, twice[15]],
    order,
    small: [small[0], small[n - 1]],
    large: large[299_999],
    plain: plain[6],
    root: root[2],
    half: [...half],
    ints: [...ints],
  };
}

switch (mode) {
  case 'sync':
    await attempt('sync', async () => {
      const buf = sharedArray(Float32Array, 1024);
      let atOnce = 0;
      for (let i = 0; i < 200; i++) {
        buf.fill(1);
        const work = pg.allReduce(buf);
        if (buf[1023] === size) atOnce++;
        await work.wait();
        if (buf[0] !== size || buf[1023] !== size) throw new Error(`wrong sum ${buf[0]} at ${i}`);
      }
      // a plain array whose peer is late: read in the first native call, the result finished in
      // staging and copied out (a wasm heap view may have moved by then)
      const plain = new Float32Array(8).fill(1);
      if (rank === size - 1) await sleep(200);
      await pg.allReduce(plain).wait();
      if (plain[0] !== size || plain[7] !== size) throw new Error(`wrong late sum ${plain[0]}`);
      return atOnce;
    });
    break;
  case 'mixed':
    await attempt('mixed', mixed);
    break;
  case 'mismatch':
    await attempt('collective', () => pg.allReduce(new Float32Array(rank === 0 ? 8 : 9)).wait());
    await attempt('after', () => pg.allReduce(new Float32Array(8)).wait());
    break;
  case 'other-op': {
    const buf = sharedArray(Float32Array, 8);
    await attempt('collective', () => (rank === 0 ? pg.allReduce(buf) : pg.broadcast(buf, { src: 1 })).wait());
    await attempt('after', () => pg.allReduce(buf).wait());
    break;
  }
  case 'timeout':
    if (rank === last) await sleep(4000);
    else await attempt('collective', () => pg.allReduce(new Float32Array(16)).wait());
    // stay to answer the other ranks' probes
    await sleep(1500);
    break;
}
await destroyProcessGroup();
