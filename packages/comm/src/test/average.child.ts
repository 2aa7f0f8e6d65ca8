import { createHash } from 'node:crypto';
import { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from '@ddp/half';
import type { CommArray, Dtype, HalfDtype } from '../dtypes.js';
import { destroyProcessGroup, initProcessGroup, sharedArray } from '../index.js';
import { makeArray, value } from './reference.js';

/**
 * AVG of values whose sum overflows the dtype while their average does not, on every path:
 * small (main thread: shared memory or the direct exchange), large (comm thread: shared
 * memory, or the ring over sockets), half precision, and reduce. Even elements are huge
 * (alternating sign), odd ones small integers. Each case reports whether the huge averages
 * are finite and how far from the exact average, whether the small ones equal
 * sum-then-divide bit for bit, and a hash of the result (equal on every rank). int32 (values
 * near both limits, so the int32 sum wraps) must equal the exact average truncated toward zero.
 */
const pg = await initProcessGroup({ timeoutMs: 60_000 });
const N = pg.size;
const HUGE: Record<Dtype, (r: number) => number> = {
  float32: (r) => 2.6e38 + r * 2e37,
  float64: (r) => 1.5e308 + r * 1e307,
  bfloat16: (r) => 2.6e38 + r * 2e37,
  float16: (r) => 40_000 + r * 5000,
  int32: () => 0,
};
const toWord = (d: Dtype, v: number) => (d === 'float16' ? floatToHalf(v) : d === 'bfloat16' ? floatToBfloat(v) : v);
const fromWord = (d: Dtype, w: number) => (d === 'float16' ? halfToFloat(w) : d === 'bfloat16' ? bfloatToFloat(w) : w);
const rounded = (d: Dtype, v: number) => fromWord(d, toWord(d, d === 'float64' ? v : Math.fround(v)));

function input(d: Dtype, rank: number, n: number): CommArray {
  const a = makeArray(d, n);
  for (let i = 0; i < n; i++) a[i] = toWord(d, i % 2 ? value(rank, i, 1) : (i % 4 ? -1 : 1) * HUGE[d](rank));
  return a;
}

function check(phase: string, d: Dtype, got: CommArray, ranks: number[], offset = 0): void {
  let finite = true;
  let maxRel = 0;
  let ordinaryExact = true;
  for (let i = offset; i < offset + got.length; i++) {
    const v = fromWord(d, got[i - offset]);
    if (i % 2) {
      const sum = ranks.reduce((s, r) => s + value(r, i, 1), 0);
      if (v !== rounded(d, sum / ranks.length)) ordinaryExact = false;
      continue;
    }
    const exact = ranks.reduce((s, r) => s + fromWord(d, toWord(d, (i % 4 ? -1 : 1) * HUGE[d](r))), 0) / ranks.length;
    if (!Number.isFinite(v)) finite = false;
    else maxRel = Math.max(maxRel, Math.abs(v - exact) / Math.abs(exact));
  }
  const hash = createHash('sha256')
    .update(new Uint8Array(got.buffer, got.byteOffset, got.byteLength))
    .digest('hex');
  console.log(`RESULT ${JSON.stringify({ phase, finite, maxRel, ordinaryExact, hash })}`);
}

const all = Array.from({ length: N }, (_, r) => r);
const half = (d: Dtype) => (d === 'float16' || d === 'bfloat16' ? { dtype: d as HalfDtype } : {});
// 5 elements: the main thread; 100 000: the comm thread (shared memory, or the ring over sockets)
const CASES = [
  ['float32', [5, 100_000]],
  ['float64', [5, 100_000]],
  ['bfloat16', [5, 300_000]],
  ['float16', [300_000]],
] as const;
for (const [d, sizes] of CASES) {
  for (const n of sizes) {
    const buf = input(d, pg.rank, n);
    await pg.allReduce(buf, { op: 'avg', ...half(d) }).wait();
    check(`allReduce ${d}×${n}`, d, buf, all);
  }
}
for (const n of [5, 100_000]) {
  const root = n === 5 ? 0 : N - 1;
  const buf = input('float32', pg.rank, n);
  await pg.reduce(buf, { dst: root, op: 'avg' }).wait();
  if (pg.rank === root) check(`reduce float32×${n}`, 'float32', buf, all);
}
for (const n of [6, 40_000]) {
  const out = new Float32Array(n);
  await pg.reduceScatter(out, input('float32', pg.rank, n * N), { op: 'avg' }).wait();
  check(`reduceScatter float32×${n} (own chunk)`, 'float32', out, all, n * pg.rank);
}

/** int32 near both limits: 2^31 − 1 − r, −2^31 + r² (its quotient is fractional: truncation shows), small. */
function int32Input(rank: number, n: number, offset = 0, into = new Int32Array(n)): Int32Array {
  for (let i = 0; i < n; i++) {
    const k = i + offset;
    into[i] = k % 2 === 0 ? 2 ** 31 - 1 - rank : k % 4 === 1 ? -(2 ** 31) + rank * rank : rank * 7 - (k % 100);
  }
  return into;
}

function checkInt32(phase: string, got: Int32Array, offset = 0): void {
  const sums = all.map((r) => int32Input(r, got.length, offset));
  const exact = got.every((v, i) => v === Math.trunc(sums.reduce((s, a) => s + a[i], 0) / N));
  const hash = createHash('sha256')
    .update(new Uint8Array(got.buffer, got.byteOffset, got.byteLength))
    .digest('hex');
  console.log(`RESULT ${JSON.stringify({ phase, finite: true, maxRel: 0, ordinaryExact: exact, hash })}`);
}

for (const n of [5, 100_000]) {
  const plain = int32Input(pg.rank, n);
  await pg.allReduce(plain, { op: 'avg' }).wait();
  checkInt32(`allReduce int32×${n}`, plain);
  const shared = int32Input(pg.rank, n, 0, sharedArray(Int32Array, n));
  await pg.allReduce(shared, { op: 'avg' }).wait();
  checkInt32(`allReduce int32×${n} shared`, shared);
  const root = n === 5 ? 0 : N - 1;
  const buf = int32Input(pg.rank, n);
  await pg.reduce(buf, { dst: root, op: 'avg' }).wait();
  if (pg.rank === root) checkInt32(`reduce int32×${n}`, buf);
}
for (const n of [6, 40_000]) {
  const out = new Int32Array(n);
  await pg.reduceScatter(out, int32Input(pg.rank, n * N), { op: 'avg' }).wait();
  checkInt32(`reduceScatter int32×${n} (own chunk)`, out, n * pg.rank);
}
await destroyProcessGroup();
