import { createHash } from 'node:crypto';
import type { Dtype, HalfDtype, ReduceOp } from '../dtypes.js';
import { destroyProcessGroup, getWireStats, initProcessGroup } from '../index.js';
import { firstDiff, generate, makeArray, OPS, reference } from './reference.js';

/**
 * All-reduces whose results a run on one host and a run across hosts (the hierarchical
 * path) must give bit for bit: exact inputs (reference.ts) in every dtype and op at a
 * direct-sized and a ring-sized length, and in every dtype at a multi-piece (> one 4 MiB slot,
 * odd) length, with the sum only there (the element size moves the pieces' edges, the op does
 * not; CI time); inexact
 * float32 inputs (same on every rank only); an AVG whose sum overflows float32; and the
 * bytes each float32 SUM put on the wire. Prints RESULT { hashes, exact, wrong, sent, overflowAvg }.
 */
const pg = await initProcessGroup({ timeoutMs: 120_000 });
const ranks = Array.from({ length: pg.size }, (_, r) => r);
const digest = (a: ArrayBufferView) =>
  createHash('sha256')
    .update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))
    .digest('hex')
    .slice(0, 16);
const exact: Record<string, string> = {};
const wrong: string[] = [];
const sent: Record<string, number> = {};
const LENGTHS = { direct: 1000, ring: 1 << 18, pieces: 1.5 * (1 << 20) + 3 };
let salt = 0;
for (const [path, n] of Object.entries(LENGTHS)) {
  for (const d of ['float32', 'float64', 'int32', 'float16'] as Dtype[]) {
    for (const op of path === 'pieces' ? (['sum'] as ReduceOp[]) : OPS) {
      const buf = generate(d, pg.rank, n, ++salt);
      const opts = { op, ...(d === 'float16' ? { dtype: d as HalfDtype } : {}) };
      await pg.barrier().wait();
      const before = getWireStats().bytesSent;
      await pg.allReduce(buf, opts).wait();
      if (d === 'float32' && op === 'sum') sent[path] = getWireStats().bytesSent - before;
      const key = `${path}/${d}/${op}`;
      exact[key] = digest(buf);
      if (firstDiff(buf, reference(d, op, ranks, n, salt)) !== -1) wrong.push(key);
    }
  }
}
// inexact sums: the order of additions shows in the bits, so only ranks of one run must agree
const hashes: Record<string, string> = {};
for (const [path, n] of Object.entries(LENGTHS)) {
  for (const op of ['sum', 'avg', 'product'] as ReduceOp[]) {
    const buf = makeArray('float32', n) as Float32Array;
    for (let i = 0; i < n; i++) buf[i] = Math.sin(i * 0.37 + pg.rank * 1.3) * 1.0001 ** (i % 97);
    await pg.allReduce(buf, { op }).wait();
    hashes[`${path}/${op}`] = digest(buf);
  }
}
// every input finite, the sum not: the average is still 3e38
const big = new Float32Array(LENGTHS.ring).fill(3e38);
await pg.allReduce(big, { op: 'avg' }).wait();
console.log(`RESULT ${JSON.stringify({ hashes, exact, wrong, sent, overflowAvg: [...new Set(big)] })}`);
await destroyProcessGroup();
