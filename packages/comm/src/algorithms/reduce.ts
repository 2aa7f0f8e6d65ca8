import type { NumArray, ReduceOp } from '../dtypes.js';
import { native } from '../native.js';

/** @ddp/shm's op codes (AVG sums; the caller divides). */
export const NATIVE_OP = { sum: 0, avg: 0, product: 1, max: 2, min: 3 } as const;

/**
 * dst[i] = dst[i] ⊕ src[i] for the reduce op (AVG sums here; the caller divides at the end).
 * Int32 sums and products wrap like C's int32.
 */
export function reduceInto(dst: NumArray, src: NumArray, op: ReduceOp): void {
  const n = dst.length;
  // the addon's loops are vectorised (5–10× faster); below ~256 elements the call costs more
  if (native && n >= 256) {
    native.reduce(dst, src, NATIVE_OP[op]);
    return;
  }
  if (dst instanceof Int32Array) {
    const s = src as Int32Array;
    switch (op) {
      case 'sum':
      case 'avg':
        for (let i = 0; i < n; i++) dst[i] = (dst[i] + s[i]) | 0;
        return;
      case 'product':
        for (let i = 0; i < n; i++) dst[i] = Math.imul(dst[i], s[i]);
        return;
    }
  }
  const d = dst as Float64Array;
  const s = src as Float64Array;
  switch (op) {
    case 'sum':
    case 'avg':
      for (let i = 0; i < n; i++) d[i] = d[i] + s[i];
      return;
    case 'product':
      for (let i = 0; i < n; i++) d[i] = d[i] * s[i];
      return;
    case 'max':
      for (let i = 0; i < n; i++) {
        const a = d[i];
        const b = s[i];
        // NaN propagates, as in PyTorch
        d[i] = a > b || Number.isNaN(a) ? a : b;
      }
      return;
    case 'min':
      for (let i = 0; i < n; i++) {
        const a = d[i];
        const b = s[i];
        d[i] = a < b || Number.isNaN(a) ? a : b;
      }
      return;
  }
}

/**
 * Finishes AVG: divides the sum by the number of ranks (int32 truncates toward zero). With
 * `inputOf` (rank r's value at i, for paths that still hold every rank's input), an element
 * whose sum overflowed to ±Infinity although every input is finite is averaged as
 * Σ (x_r / N) in rank order instead: the average of values near the type's limit is finite.
 * Only such elements change, so ordinary results stay bit-identical to sum-then-divide; the
 * caller reduces each element on one rank (or identically on all), so ranks agree bit for bit.
 */
export function finishAverage(buf: NumArray, size: number, inputOf?: (r: number, i: number) => number): void {
  if (buf instanceof Int32Array) {
    for (let i = 0; i < buf.length; i++) buf[i] = Math.trunc(buf[i] / size);
    return;
  }
  const round = buf instanceof Float32Array ? Math.fround : (x: number) => x;
  // the addon divides at memory speed (this loop in JavaScript cost a 2-rank all-reduce of
  // 48 MiB as much CPU as the rest of it); then only a ±Infinity quotient needs a second look
  if (native && buf.length >= 256) {
    if (native.divide(buf, size) || !inputOf) return;
    for (let i = 0; i < buf.length; i++)
      if (Math.abs(buf[i]) === Number.POSITIVE_INFINITY) buf[i] = dividedFirst(i, size, inputOf, round) ?? buf[i];
    return;
  }
  for (let i = 0; i < buf.length; i++) {
    let v = buf[i] / size;
    const infinite = v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY;
    if (infinite && inputOf) v = dividedFirst(i, size, inputOf, round) ?? v;
    buf[i] = v;
  }
}

/** Σ (x_r / N) in rank order, rounded like the array, or null when an input is not finite (the sum is then right). */
function dividedFirst(
  i: number,
  size: number,
  inputOf: (r: number, i: number) => number,
  round: (x: number) => number,
) {
  let acc = 0;
  for (let r = 0; r < size; r++) {
    const x = inputOf(r, i);
    if (!Number.isFinite(x)) return null;
    acc = round(acc + round(x / size));
  }
  return acc;
}
