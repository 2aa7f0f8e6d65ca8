import type { Kind } from '@ddp/mpi';
import { narrowHalf, widenHalf } from '../algorithms/half-codec.js';
import { truncatedAverageInto, widenInt32 } from '../algorithms/int-average.js';
import type { P2POp } from '../api/group.js';
import {
  bytesPerElement,
  type CommArray,
  DTYPE_CODE,
  type Dtype,
  type HalfDtype,
  movedDtype,
  OP_CODE,
  type OpName,
  REDUCE_CODE,
  type ReduceOp,
  viewAs,
} from '../dtypes.js';
import { InvalidArgumentError } from '../errors.js';
import { bytes } from '../scheduling/staging.js';
import type { NativeCall } from './mpi-runtime.js';

/**
 * How each call of the MPI process group is encoded for @ddp/mpi's MPI thread: the kind, the
 * agreement rule and descriptor the members compare (mpi.cc), the element type MPI moves,
 * and how the result is copied back.
 */

// @ddp/mpi's Kind and Rule values (a value import would make the optional addon a hard dependency).
export const K = {
  allReduce: 3,
  broadcast: 4,
  reduce: 5,
  allGather: 6,
  gather: 7,
  scatter: 8,
  reduceScatter: 9,
  allToAll: 10,
  barrier: 11,
  p2p: 12,
} as const;
export const SAME_CALL = 1;
export const SAME_COUNT = 2;
const FIXED = 6;

/** MPI's element type for moving a dtype (16-bit words for float16/bfloat16). */
const MOVE_TYPE: Record<Dtype, number> = { float32: 1, float64: 2, int32: 3, float16: 4, bfloat16: 4 };
const isHalf = (d: Dtype): d is HalfDtype => d === 'float16' || d === 'bfloat16';

/** A call ready for the MPI thread, and what to do with its result. */
export interface Prepared<T> {
  call: NativeCall;
  finish: (out: ArrayBuffer, all: Int32Array | undefined) => T;
}

/** The members of a communicator, and this rank's index among them. */
export interface Members {
  size: number;
  rank: number;
}

/**
 * This rank's descriptor of a call: op, dtype, reduce op, root, count, failed flag, counts sent to and received from
 * each member.
 */
export function descriptor(
  size: number,
  op: OpName,
  d: Dtype,
  reduce: ReduceOp | undefined,
  root: number,
  count: number,
  perMember?: number[],
): Int32Array {
  refuseBeyondInt(op, count, 'elements');
  const a = new Int32Array(FIXED + 2 * size);
  a.set([OP_CODE[op], DTYPE_CODE[d], reduce ? REDUCE_CODE[reduce] : 0, root, count, 0]);
  if (perMember) a.set(perMember, FIXED);
  return a;
}

/**
 * allReduce, reduce and reduceScatter: `input` reduced in MPI (half dtypes widened to
 * float32 first, narrowed after); AVG divides in @ddp/mpi, except int32 AVG, which MPI sums
 * in float64 and this rank divides (int-average.ts: the int32 sum may leave int32).
 */
export function reductionCall(
  m: Members,
  call: 'allReduce' | 'reduce' | 'reduceScatter',
  input: CommArray,
  d: Dtype,
  op: ReduceOp,
  root: number,
  outCount: number,
  output: CommArray,
): Prepared<void> {
  const half = isHalf(d);
  const intAvg = d === 'int32' && op === 'avg';
  const work = half ? widenHalf(input as Uint16Array, d) : intAvg ? widenInt32(input as Int32Array) : input;
  const wide = half ? new Float32Array(outCount) : intAvg ? new Float64Array(outCount) : output;
  const out = call !== 'reduceScatter' ? work : wide;
  const count = call === 'reduceScatter' ? outCount : input.length;
  const receives = call !== 'reduce' || m.rank === root;
  const kind = K[call] as Kind;
  const native: NativeCall = {
    kind,
    rule: SAME_COUNT,
    type: half ? 1 : intAvg ? MOVE_TYPE.float64 : MOVE_TYPE[d],
    op: REDUCE_CODE[intAvg ? 'sum' : op],
    root,
    desc: descriptor(m.size, call, d, op, root, count),
    counts: null,
    a: work,
    b: call === 'reduceScatter' ? out : null,
  };
  return {
    call: native,
    finish: () => {
      if (!receives) return;
      if (half) narrowHalf(out as Float32Array, d, output as Uint16Array);
      if (intAvg) truncatedAverageInto(out as Float64Array, m.size, output as Int32Array);
    },
  };
}

/** A call that moves elements without arithmetic (half dtypes as 16-bit words). */
export function moveCall(
  m: Members,
  call: OpName,
  d: Dtype,
  rule: number,
  root: number,
  count: number,
  a: CommArray | null,
  b: CommArray | null,
  perMember?: number[],
): NativeCall {
  const desc = descriptor(m.size, call, d, undefined, root, count, perMember);
  return { kind: K[call as keyof typeof K] as Kind, rule, type: MOVE_TYPE[d], op: 0, root, desc, counts: null, a, b };
}

/** Per-member arrays out of a gathered buffer, sized by the members' descriptors. */
export function splitGathered(size: number, d: Dtype, out: ArrayBuffer, all: Int32Array | undefined): CommArray[] {
  const stride = FIXED + 2 * size;
  let off = 0;
  return Array.from({ length: size }, (_, r) => {
    const n = (all as Int32Array)[r * stride + 4];
    const a = viewAs(d, out, off, n);
    off += n * bytesPerElement(d);
    return a;
  });
}

/** Arrays one after another in a new array of `like`'s type. */
export function concat(like: CommArray, arrays: CommArray[]): CommArray {
  const all = new (like.constructor as new (n: number) => CommArray)(arrays.reduce((s, a) => s + a.length, 0));
  let off = 0;
  for (const a of arrays) {
    all.set(a as never, off);
    off += a.length;
  }
  return all;
}

/**
 * Every send and receive at once (MPI_Isend/Irecv, then MPI_Waitall), staged in one buffer;
 * `received` copies what arrived into the receives' arrays. Ops are validated by the caller.
 */
export function p2pCall(ops: P2POp[]): { call: NativeCall; received: () => void } {
  const entries: number[] = [];
  let off = 0;
  for (const o of ops) {
    // the dtype rides in the tag: MPI moves bytes, so an int32 send met a float32 receive of the same size and was
    // read as floats; now they do not match (a timeout, as a tag mismatch)
    const dtype = DTYPE_CODE[movedDtype(o.buf, o.dtype, o.op)];
    entries.push(o.op === 'isend' ? 1 : 0, o.peer, (o.tag ?? 0) * 8 + dtype, off, o.buf.byteLength);
    off += Math.ceil(o.buf.byteLength / 8) * 8;
  }
  refuseBeyondInt('batchIsendIrecv', off, "bytes (all the batch's messages, staged together)");
  const staged = new Uint8Array(off);
  const at = (i: number) => entries[i * 5 + 3];
  ops.forEach((o, i) => {
    if (o.op === 'isend') staged.set(bytes(o.buf), at(i));
  });
  const call: NativeCall = {
    kind: K.p2p as Kind,
    rule: 0,
    type: 4,
    op: 0,
    root: 0,
    desc: null,
    counts: Int32Array.from(entries),
    a: staged,
    b: null,
  };
  const received = () =>
    ops.forEach((o, i) => {
      if (o.op === 'irecv') bytes(o.buf).set(staged.subarray(at(i), at(i) + o.buf.byteLength));
    });
  return { call, received };
}

/**
 * MPI counts in C ints: past 2^31 − 1 a count wrapped (a point-to-point batch of 2 GiB crashed the
 * process; one past 4 GiB would have written over an earlier message's bytes).
 */
function refuseBeyondInt(op: string, n: number, what: string): void {
  if (n <= 0x7fffffff) return;
  throw new InvalidArgumentError(
    `${op}: ${n} ${what} on the mpi backend, whose counts are C ints (at most 2^31 − 1): split it into ` +
      'several calls, or use the default backend',
    { op },
  );
}
