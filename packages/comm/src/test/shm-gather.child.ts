import { setTimeout as sleep } from 'node:timers/promises';
import type { Dtype, HalfDtype, ReduceOp } from '../dtypes.js';
import { CommError, destroyProcessGroup, getWireStats, initProcessGroup } from '../index.js';
import { firstDiff, generate, makeArray, OPS, reference } from './reference.js';

/**
 * Reduce-scatters and all-gathers among ranks of one host, one mode per run (argv[2]):
 *   values   – exact inputs (reference.ts) in every dtype and op, per-rank chunks of a direct and a ring
 *              size, and (float32, float16) a multi-piece one (> one slot, odd); allGather of uneven
 *              sizes; a float32 reduce-scatter of inexact values against the same chunk of an
 *              all-reduce (bit for bit); an AVG whose sum overflows float32; and the largest number
 *              of bytes any of them put on the sockets.
 *              Prints RESULT { wrong, sent }.
 *   kill     – loops large reduce-scatters and all-gathers; rank 1 kills itself (SIGKILL) during one
 *   mismatch – the last rank all-gathers where the others reduce-scatter
 *   timeout  – the last rank sleeps instead of calling a reduce-scatter
 * Failures print RESULT { phase, name, message, ranks }.
 */
const mode = process.argv[2];
const pg = await initProcessGroup({ timeoutMs: mode === 'timeout' ? 2000 : 60_000 });
const { rank, size } = pg;
const ranks = Array.from({ length: size }, (_, r) => r);
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
async function attempt(phase: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
    report({ phase, name: 'ok' });
  } catch (e) {
    const err = e instanceof CommError ? e : null;
    report({ phase, name: err?.name ?? 'other', message: String((e as Error).message), ranks: err?.ranks });
  }
}

/** Sockets bytes `op` cost this rank (heartbeats are rare: far below the bound the test allows). */
async function sentBy(op: () => Promise<unknown>): Promise<number> {
  await pg.barrier().wait();
  const before = getWireStats().bytesSent;
  await op();
  return getWireStats().bytesSent - before;
}

const big = new Float32Array(3 * 1024 * 1024);
switch (mode) {
  case 'values': {
    const wrong: string[] = [];
    let sent = 0;
    let salt = 0;
    // every dtype and op at a direct and a ring size; float32 and float16 (widened to float32) also in
    // several pieces, with the sum only there (the op does not move the pieces' edges; CI time)
    for (const n of [1000, 1 << 17, (1 << 20) + 3]) {
      const pieces = n > 1 << 20;
      const dtypes: Dtype[] = pieces ? ['float32', 'float16'] : ['float32', 'float64', 'int32', 'float16', 'bfloat16'];
      for (const d of dtypes) {
        for (const op of pieces ? (['sum'] as ReduceOp[]) : OPS) {
          const input = generate(d, rank, n * size, ++salt);
          const output = makeArray(d, n);
          const gathered = makeArray(d, n * size);
          const dtype = d === 'float16' || d === 'bfloat16' ? { dtype: d as HalfDtype } : {};
          sent = Math.max(sent, await sentBy(() => pg.reduceScatter(output, input, { op, ...dtype }).wait()));
          sent = Math.max(sent, await sentBy(() => pg.allGatherInto(gathered, output, dtype).wait()));
          if (firstDiff(gathered, reference(d, op, ranks, n * size, salt)) !== -1) wrong.push(`${n}/${d}/${op}`);
        }
      }
    }
    // uneven: rank r contributes r·1000003 + 5 elements
    const own = Float64Array.from({ length: rank * 1_000_003 + 5 }, (_, i) => rank + i / 8);
    let parts: Float64Array[] = [];
    sent = Math.max(sent, await sentBy(async () => (parts = (await pg.allGather(own).wait()) as Float64Array[])));
    parts.forEach((p, r) => {
      if (p.length !== r * 1_000_003 + 5 || p.some((v, i) => v !== r + i / 8)) wrong.push(`allGather uneven rank ${r}`);
    });
    // inexact: within one all-reduce piece a chunk has the same owner, who reduces it in the same order: same bits
    const n = 200_003;
    const values = Float32Array.from(
      { length: n * size },
      (_, i) => Math.sin(i * 0.37 + rank * 1.3) * 1.0001 ** (i % 97),
    );
    const mine = new Float32Array(n);
    await pg.reduceScatter(mine, values).wait();
    await pg.allReduce(values).wait();
    if (firstDiff(mine, values.subarray(rank * n, (rank + 1) * n)) !== -1) wrong.push('inexact sum vs allReduce');
    // every input finite, the sum not: the average is still 3e38
    const huge = new Float32Array(4 * size).fill(3e38);
    const avg = new Float32Array(4);
    await pg.reduceScatter(avg, huge, { op: 'avg' }).wait();
    if (avg.some((v) => Math.abs(v - 3e38) > 1e32)) wrong.push(`overflowing avg gave ${avg[0]}`);
    report({ wrong, sent });
    break;
  }
  case 'kill':
    report({ phase: 'started', name: 'ok' });
    if (rank === 1) setTimeout(() => process.kill(process.pid, 'SIGKILL'), 500);
    await attempt('loop', async () => {
      const out = new Float32Array(big.length / size);
      for (let i = 0; i < 100_000; i++) {
        await pg.reduceScatter(out, big).wait();
        await pg.allGatherInto(big, out).wait();
      }
    });
    break;
  case 'mismatch':
    await attempt('collective', () =>
      rank === size - 1
        ? pg.allGatherInto(new Float32Array(300 * size), new Float32Array(300)).wait()
        : pg.reduceScatter(new Float32Array(300), new Float32Array(300 * size)).wait(),
    );
    await attempt('after', () => pg.barrier().wait());
    break;
  case 'timeout':
    if (rank === size - 1) await sleep(4000);
    else
      await attempt('collective', () =>
        pg.reduceScatter(new Float32Array(300_000), big.subarray(0, 300_000 * size)).wait(),
      );
    // stay to answer the other ranks' probes
    await sleep(1500);
    break;
}
// a killed rank's peers leave without the collective teardown
if (mode === 'kill') process.exit(0);
await destroyProcessGroup();
