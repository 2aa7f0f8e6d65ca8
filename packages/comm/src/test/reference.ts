import { bfloatToFloat, floatToBfloat, floatToHalf, halfToFloat } from '@ddp/half';
import type { CommArray, Dtype, ReduceOp } from '../dtypes.js';

/** Test data and locally computed references for multi-process collective tests. */

export const DTYPES: Dtype[] = ['float32', 'float64', 'int32', 'float16', 'bfloat16'];
export const OPS: ReduceOp[] = ['sum', 'avg', 'max', 'min', 'product'];

/** Small integers, so every sum and product is exact in every dtype and any order. */
export function value(rank: number, i: number, salt: number): number {
  return ((i * 7 + rank * 13 + salt * 5) % 11) - 5;
}

const encode = (d: Dtype, v: number) => (d === 'float16' ? floatToHalf(v) : d === 'bfloat16' ? floatToBfloat(v) : v);
const decode = (d: Dtype, w: number) => (d === 'float16' ? halfToFloat(w) : d === 'bfloat16' ? bfloatToFloat(w) : w);

export function makeArray(d: Dtype, n: number): CommArray {
  switch (d) {
    case 'float32':
      return new Float32Array(n);
    case 'float64':
      return new Float64Array(n);
    case 'int32':
      return new Int32Array(n);
    default:
      return new Uint16Array(n);
  }
}

// value(rank, i, salt) repeats every PERIOD elements: arrays are one period, tiled (millions of elements per check)
const PERIOD = 11;

/** `a` filled with `period` repeated (doubling copies). */
function tile(a: CommArray, period: number[]): CommArray {
  a.set(period.slice(0, a.length));
  for (let filled = period.length; filled < a.length; filled *= 2) a.copyWithin(filled, 0, filled);
  return a;
}

export function generate(d: Dtype, rank: number, n: number, salt: number): CommArray {
  return tile(
    makeArray(d, n),
    Array.from({ length: PERIOD }, (_, i) => encode(d, value(rank, i, salt))),
  );
}

function combine(d: Dtype, op: ReduceOp, a: number, b: number): number {
  if (d === 'int32') {
    if (op === 'product') return Math.imul(a, b);
    if (op === 'sum' || op === 'avg') return (a + b) | 0;
  }
  if (op === 'sum' || op === 'avg') return a + b;
  if (op === 'product') return a * b;
  return op === 'max' ? Math.max(a, b) : Math.min(a, b);
}

/** Reference of a reduction of generate(d, r, n, salt) over ranks `ranks`. */
export function reference(d: Dtype, op: ReduceOp, ranks: number[], n: number, salt: number): CommArray {
  const period = Array.from({ length: PERIOD }, (_, i) => {
    let acc = value(ranks[0], i, salt);
    for (const r of ranks.slice(1)) acc = combine(d, op, acc, value(r, i, salt));
    if (op === 'avg') acc = d === 'int32' ? Math.trunc(acc / ranks.length) : acc / ranks.length;
    if (d === 'float32' || d === 'float16' || d === 'bfloat16') acc = Math.fround(acc);
    return encode(d, acc);
  });
  return tile(makeArray(d, n), period);
}

/** First differing index, or −1 (compares bits: NaN-safe, −0 ≠ +0 is not an issue here). */
export function firstDiff(a: CommArray, b: CommArray): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  if (Buffer.compare(x, y) === 0) return -1;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return Math.floor(i / a.BYTES_PER_ELEMENT);
  return -1;
}

export function show(d: Dtype, a: CommArray, at: number): string {
  return `${decode(d, a[at])}`;
}
