import type { CommArray, HalfDtype, ReduceOp } from '../dtypes.js';
import type { Fingerprint } from './frame.js';

/**
 * The parameter block of @ddp/shm's `exchange` (packages/shm/src/exchange.cc): a small
 * all-reduce of one host in one native call, one flag per op. Word indices into an Int32Array
 * each lane keeps (filled once with the segment's layout, then per op), so an op allocates
 * nothing to call it.
 */
export const P = {
  size: 0,
  rank: 1,
  bells: 2,
  progress: 3,
  table: 4,
  slots: 5,
  slotBytes: 6,
  gen: 7,
  seq: 8,
  fp: 9,
  dtype: 14,
  op: 15,
  spinUs: 16,
  phase: 17,
  peer: 18,
  length: 19,
} as const;

/** What `exchange` returns. */
export const Exchanged = { Done: 0, Late: 1, Mismatch: 2 } as const;

/**
 * All-reduces up to this size take the one-step exchange (every rank reduces the whole
 * message: N× the reads of the owner-per-chunk steps, cheaper than a second round of flags
 * while messages are small); larger ones the two-step path of algorithms/shm.ts. Decided by
 * count and dtype, which every rank's fingerprint agrees on, so all ranks take the same one.
 */
export const ONE_STEP_BYTES = 32 * 1024;

const OP_CODE: Record<ReduceOp, number> = { sum: 0, product: 1, max: 2, min: 3, avg: 4 };

function dtypeCode(data: CommArray, half: HalfDtype | null): number {
  if (half) return half === 'float16' ? 3 : 4;
  return data instanceof Float32Array ? 0 : data instanceof Float64Array ? 1 : 2;
}

/** Writes one op into the block: its counter target, data set, fingerprint, dtype and reduce op. */
export function beginExchange(
  p: Int32Array,
  fp: Fingerprint,
  gen: number,
  slots: number,
  data: CommArray,
  op: ReduceOp,
  half: HalfDtype | null,
  spinUs: number,
): void {
  p[P.gen] = gen;
  p[P.slots] = slots;
  p[P.seq] = fp.seq;
  p[P.fp] = fp.op;
  p[P.fp + 1] = fp.dtype;
  p[P.fp + 2] = fp.reduceOp;
  p[P.fp + 3] = fp.count;
  p[P.fp + 4] = fp.root;
  p[P.dtype] = dtypeCode(data, half);
  p[P.op] = OP_CODE[op];
  p[P.spinUs] = spinUs;
  p[P.phase] = 0;
}
