import { InvalidArgumentError } from './errors.js';

/** Arrays the collectives move. Uint16Array carries float16 or bfloat16 words. */
export type CommArray = Float32Array | Float64Array | Int32Array | Uint16Array;
/** Arrays the reduction arithmetic runs on (half words are widened to float32 first). */
export type NumArray = Float32Array | Float64Array | Int32Array;
export type HalfDtype = 'float16' | 'bfloat16';
export type Dtype = 'float32' | 'float64' | 'int32' | HalfDtype;

export const ReduceOp = { SUM: 'sum', AVG: 'avg', MAX: 'max', MIN: 'min', PRODUCT: 'product' } as const;
export type ReduceOp = (typeof ReduceOp)[keyof typeof ReduceOp];

/** Wire codes of dtypes, reduce ops and collectives (they travel in every frame header). */
export const DTYPE_CODE: Record<Dtype, number> = { float32: 1, float64: 2, int32: 3, float16: 4, bfloat16: 5 };
export const REDUCE_CODE: Record<ReduceOp, number> = { sum: 1, avg: 2, max: 3, min: 4, product: 5 };
export const OP_CODE = {
  allReduce: 1,
  broadcast: 2,
  allGather: 3,
  allGatherInto: 4,
  reduceScatter: 5,
  reduce: 6,
  gather: 7,
  scatter: 8,
  allToAll: 9,
  barrier: 10,
  send: 11,
} as const;
export type OpName = keyof typeof OP_CODE;

const byCode = <T extends string>(table: Record<T, number>) =>
  Object.fromEntries(Object.entries(table).map(([k, v]) => [v, k])) as Record<number, T>;
export const DTYPE_NAME = byCode(DTYPE_CODE);
export const REDUCE_NAME = byCode(REDUCE_CODE);
export const OP_NAME = byCode(OP_CODE);

export function dtypeOf(a: CommArray, half?: HalfDtype): Dtype {
  // resized under an op, its result was cut short silently or an untyped RangeError (probe BM)
  if ((a?.buffer as { resizable?: boolean } | undefined)?.resizable)
    throw new InvalidArgumentError(
      'an array over a resizable ArrayBuffer: its length may change while an op holds it; pass a fixed-length one',
    );
  // a Float32Array given dtype 'float16' was reduced as float32, the option dropped (no compression)
  if (half !== undefined && !(a instanceof Uint16Array))
    throw new InvalidArgumentError(
      `opts.dtype '${half}' names the 16-bit words of a Uint16Array, and this is a ${a.constructor.name}: ` +
        'encode it with @ddp/half first (or use a 16-bit comm hook)',
    );
  if (a instanceof Float32Array) return 'float32';
  if (a instanceof Float64Array) return 'float64';
  if (a instanceof Int32Array) return 'int32';
  if (a instanceof Uint16Array) {
    if (half !== 'float16' && half !== 'bfloat16')
      throw new InvalidArgumentError("a Uint16Array needs opts.dtype 'float16' or 'bfloat16'");
    return half;
  }
  throw new InvalidArgumentError(`unsupported array type ${(a as object).constructor?.name}`);
}

/**
 * Moving an array takes a byte view of it, and V8 (Node 20) makes none over 2^32 − 1 bytes: a bigger
 * array failed deep in the op (a RangeError, or an error saying it was detached; probe BM).
 */
export const MAX_MOVED_BYTES = 2 ** 32 - 1;

/** Refuses an array too large to move, naming the limit. */
export function checkMovable(a: ArrayBufferView, op: string): void {
  if (a.byteLength > MAX_MOVED_BYTES)
    throw new InvalidArgumentError(
      `${op}: an array of ${a.byteLength} bytes; arrays an op moves hold at most 2^32 − 1 bytes (4 GiB), ` +
        "V8's limit on a byte view: split it",
      { op },
    );
}

/** The dtype of an op that only moves data: a Uint16Array's words need no half dtype named. */
export function movedDtype(a: CommArray, half?: HalfDtype, op = 'a collective'): Dtype {
  checkMovable(a, op);
  return dtypeOf(a, half ?? (a instanceof Uint16Array ? 'float16' : undefined));
}

/** Whether two arrays share bytes (the same buffer, overlapping ranges). */
export const arraysOverlap = (a: ArrayBufferView, b: ArrayBufferView): boolean =>
  a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;

export function bytesPerElement(d: Dtype): number {
  return d === 'float64' ? 8 : d === 'float16' || d === 'bfloat16' ? 2 : 4;
}

/** A typed view of the given dtype over bytes (half dtypes as Uint16Array). */
export function viewAs(d: Dtype, buffer: ArrayBufferLike, byteOffset: number, length: number): CommArray {
  switch (d) {
    case 'float32':
      return new Float32Array(buffer, byteOffset, length);
    case 'float64':
      return new Float64Array(buffer, byteOffset, length);
    case 'int32':
      return new Int32Array(buffer, byteOffset, length);
    default:
      return new Uint16Array(buffer, byteOffset, length);
  }
}

/** A fresh array of the same type as `like`. */
export function allocLike(like: CommArray, length: number): CommArray {
  return new (like.constructor as new (n: number) => CommArray)(length);
}

type ArrayCtor = Float32ArrayConstructor | Float64ArrayConstructor | Int32ArrayConstructor | Uint16ArrayConstructor;

/**
 * An array backed by a SharedArrayBuffer: allReduce and broadcast on it skip the copies to
 * and from the comm thread's staging buffer (use it for gradient buckets).
 */
export function sharedArray<C extends ArrayCtor>(ctor: C, length: number): InstanceType<C> {
  const Ctor = ctor as unknown as new (b: SharedArrayBuffer) => InstanceType<C>;
  return new Ctor(new SharedArrayBuffer(length * ctor.BYTES_PER_ELEMENT));
}

/** The reduce op named in the options ('sum' when absent); anything else is an InvalidArgumentError. */
export function reduceOpOf(op: ReduceOp | undefined, what: string): ReduceOp {
  if (op === undefined) return 'sum';
  if (typeof op !== 'string' || !Object.hasOwn(REDUCE_CODE, op)) {
    throw new InvalidArgumentError(
      `${what}: unknown reduce op ${JSON.stringify(op)} (expected one of ${Object.keys(REDUCE_CODE).join(', ')})`,
      { op: what },
    );
  }
  return op;
}
