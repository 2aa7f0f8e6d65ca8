import { type ProcessGroup, ReduceOp, sharedArray } from '@ddp/comm';
import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from '@ddp/tensor';
import type { BucketSlot } from './bucket.js';

/** What every hook learns about its bucket. */
interface BucketInfo {
  readonly index: number;
  /** The parameters of this bucket, in order, and where each sits in a flat buffer. */
  readonly parameters: readonly BucketSlot[];
  readonly isLast: boolean;
  /** The group to communicate on. */
  readonly processGroup: ProcessGroup;
}

/** What a communication hook receives: one bucket of summed-locally gradients (PyTorch's GradBucket). */
export interface GradBucket extends BucketInfo {
  /** The flat gradients of this bucket on this rank (a copy). The hook may overwrite it. */
  readonly buffer: Float32Array;
}

/**
 * What an in-place hook receives: the bucket's gradients as arrays to reduce in place —
 * each large gradient in its own storage, made visible to the comm thread, and the small
 * ones copied together into one flat array (DESIGN.md, "Where gradients live"). Their count
 * and lengths are the same on every rank, whatever each rank's gradients are.
 */
export interface InPlaceBucket extends BucketInfo {
  readonly arrays: readonly Float32Array[];
}

/**
 * A communication hook: returns the bucket's gradients averaged over the group (a
 * Float32Array as long as `bucket.buffer`; it may be that buffer). The reducer calls hooks
 * in bucket order and synchronously: every rank must issue the same collectives in the
 * same order, so a hook issues its first collective before its first `await` (or chains its
 * work on its own state).
 */
export type CommHook<S = unknown> = (state: S, bucket: GradBucket) => Promise<Float32Array>;

/** A hook that leaves the averages in `bucket.arrays` (made by inPlaceHook): large gradients are not copied. */
export interface InPlaceCommHook<S = unknown> {
  (state: S, bucket: InPlaceBucket): Promise<void>;
  readonly inPlace: true;
}

/** Marks `hook` as one that reduces `bucket.arrays` where they are (same ordering rules as CommHook). */
export const inPlaceHook = <S>(hook: (state: S, bucket: InPlaceBucket) => Promise<void>): InPlaceCommHook<S> =>
  Object.assign(hook, { inPlace: true as const });

export const isInPlaceHook = <S>(hook: CommHook<S> | InPlaceCommHook<S>): hook is InPlaceCommHook<S> =>
  (hook as Partial<InPlaceCommHook<S>>).inPlace === true;

/**
 * The default: all-reduce and average each of the bucket's arrays, all issued at once (PyTorch's allreduce_hook).
 * In a group of one the average is the gradient itself: nothing is sent, not even to the comm thread.
 */
export const allreduceHook: InPlaceCommHook<unknown> = inPlaceHook(async (_state, { arrays, processGroup }) => {
  if (processGroup.size === 1) return;
  await Promise.all(arrays.map((a) => processGroup.allReduce(a, { op: ReduceOp.AVG }).wait()));
});

const halfBuffers = new WeakMap<Float32Array, Uint16Array>();

function halfBufferFor(buffer: Float32Array): Uint16Array {
  let half = halfBuffers.get(buffer);
  if (half === undefined) {
    half = sharedArray(Uint16Array, buffer.length);
    halfBuffers.set(buffer, half);
  }
  return half;
}

/**
 * Compresses to 16 bits, all-reduces (half the bytes of float32 on the wire; the sum is
 * computed in float32 by @ddp/comm and rounded back), decompresses into the bucket.
 * Divides by the group size in float32, then compresses: the sum stays in range. PyTorch casts
 * first and divides in 16 bits, so its gradients above 65504 become inf and, at group sizes that
 * are not powers of two, its results differ from these by about one 16-bit unit.
 */
function compressHook(dtype: 'float16' | 'bfloat16'): CommHook<unknown> {
  const encode = dtype === 'float16' ? encodeFloat16 : encodeBfloat16;
  const decode = dtype === 'float16' ? decodeFloat16 : decodeBfloat16;
  return async (_state, bucket) => {
    const { buffer, processGroup } = bucket;
    const size = processGroup.size;
    for (let i = 0; i < buffer.length; i++) buffer[i] /= size;
    const half = encode(buffer, halfBufferFor(buffer));
    await processGroup.allReduce(half, { op: ReduceOp.SUM, dtype }).wait();
    return decode(half, buffer);
  };
}

/** float16 compression (PyTorch's fp16_compress_hook). */
export const fp16CompressHook: CommHook<unknown> = compressHook('float16');
/** bfloat16 compression (PyTorch's bf16_compress_hook): float32's range, 8 bits of mantissa. */
export const bf16CompressHook: CommHook<unknown> = compressHook('bfloat16');
