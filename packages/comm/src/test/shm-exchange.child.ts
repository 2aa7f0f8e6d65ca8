import { combineHalves } from '../algorithms/half.js';
import { narrowHalf } from '../algorithms/half-codec.js';
import { chunkBounds } from '../algorithms/partition.js';
import { finishAverage, reduceInto } from '../algorithms/reduce.js';
import type { CommArray, Dtype, NumArray, ReduceOp } from '../dtypes.js';
import { CommError, destroyProcessGroup, initProcessGroup } from '../index.js';
import { DTYPES, firstDiff, makeArray, OPS } from './reference.js';

/**
 * The one-step exchange of small all-reduces over shared memory (@ddp/shm exchange), one
 * scenario per mode (argv[2]); each rank prints RESULT lines.
 *   bits     – every dtype and op on data whose result depends on the order of reduction
 *              (random floats, ±Infinity-bound sums for AVG, NaN for max/min), awaited one by one
 *              (fast path) and all issued behind a large op (queued): compared bit for bit with
 *              the two-step path's order computed here (chunk c from rank c's value first)
 *   op, dtype – rank 1 all-reduces with another reduce op / another dtype of the same count
 */
const mode = process.argv[2];
const report = (r: Record<string, unknown>) => console.log(`RESULT ${JSON.stringify(r)}`);
const pg = await initProcessGroup({ timeoutMs: 30_000 });
const { rank, size } = pg;

/** A value of rank r at i, the same on every rank (xorshift from a seed). */
function input(d: Dtype, r: number, n: number, salt: number): CommArray {
  const a = makeArray(d, n);
  let s = (r + 1) * 7919 + salt * 104729 + n;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  const big = d === 'float64' ? 1.7e308 : d === 'float16' ? 60000 : 3.3e38;
  for (let i = 0; i < n; i++) {
    const x = (next() - 0.5) * 100;
    if (d === 'int32') a[i] = Math.floor(next() * 2 ** 32) | 0;
    else if (d === 'float16' || d === 'bfloat16') {
      const f = i % 13 === 0 ? big : i % 17 === 0 ? Number.NaN : x;
      const w = makeArray(d, 1) as Uint16Array;
      narrowHalf(new Float32Array([f]), d, w);
      a[i] = w[0];
    } else a[i] = i % 13 === 0 ? big : i % 17 === 0 ? Number.NaN : x;
  }
  return a;
}

/** The two-step path (algorithms/shm.ts): chunk c reduced from rank c's value, then the others in rank order. */
function expected(d: Dtype, op: ReduceOp, n: number, salt: number): CommArray {
  const inputs = Array.from({ length: size }, (_, r) => input(d, r, n, salt));
  if (d === 'float16' || d === 'bfloat16') {
    const out = makeArray(d, n) as Uint16Array;
    narrowHalf(combineHalves(inputs as Uint16Array[], d, op), d, out);
    return out;
  }
  const out = makeArray(d, n) as NumArray;
  const b = chunkBounds(n, size);
  for (let c = 0; c < size; c++) {
    const chunk = (a: CommArray) => a.subarray(b[c], b[c + 1]) as NumArray;
    const result = chunk(out);
    result.set(chunk(inputs[c] as CommArray));
    for (let r = 0; r < size; r++) if (r !== c) reduceInto(result, chunk(inputs[r] as CommArray), op);
    if (op === 'avg') finishAverage(result, size, (r, i) => chunk(inputs[r] as CommArray)[i]);
  }
  return out;
}

const half = (d: Dtype) => (d === 'float16' || d === 'bfloat16' ? { dtype: d } : {});
// int32 AVG is staged as a float64 SUM before it reaches shared memory (int32-average.ts)
const cases = DTYPES.flatMap((d) => OPS.map((op) => [d, op] as const)).filter(
  ([d, op]) => d !== 'int32' || op !== 'avg',
);

async function bits(): Promise<string[]> {
  const wrong: string[] = [];
  const check = (how: string, d: Dtype, op: ReduceOp, n: number, salt: number, got: CommArray) => {
    const at = firstDiff(got, expected(d, op, n, salt));
    if (at >= 0) wrong.push(`${how} ${d} ${op} n=${n}: element ${at} is ${got[at]}`);
  };
  const lengths = [1, 3, 257, 1000];
  let salt = 0;
  for (const [d, op] of cases)
    for (const n of lengths) {
      const a = input(d, rank, n, ++salt);
      await pg.allReduce(a, { op, ...half(d) }).wait();
      check('awaited', d, op, n, salt, a);
    }
  // queued behind a large op in flight: the same protocol from the event loop
  const large = new Float32Array(1 << 20).fill(1);
  const issued: [Dtype, ReduceOp, number, number, CommArray, Promise<void>][] = [];
  const first = pg.allReduce(large).wait();
  for (const [d, op] of cases) {
    const a = input(d, rank, 300, ++salt);
    issued.push([d, op, 300, salt, a, pg.allReduce(a, { op, ...half(d) }).wait()]);
  }
  await first;
  for (const [d, op, n, s, a, done] of issued) {
    await done;
    check('queued', d, op, n, s, a);
  }
  return wrong;
}

async function attempt(what: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    report({ phase: what, name: 'ok', value: await fn() });
  } catch (e) {
    const err = e instanceof CommError ? e : null;
    report({ phase: what, name: err?.name ?? 'other', message: String(err?.message ?? e), ranks: err?.ranks });
  }
}

if (mode === 'bits') await attempt('bits', bits);
else {
  const a = mode === 'dtype' && rank === 1 ? new Int32Array(64) : new Float32Array(64);
  const op = mode === 'op' && rank === 1 ? 'max' : 'sum';
  await attempt('collective', () => pg.allReduce(a, { op }).wait());
  await attempt('after', () => pg.allReduce(new Float32Array(64)).wait());
}
await destroyProcessGroup();
