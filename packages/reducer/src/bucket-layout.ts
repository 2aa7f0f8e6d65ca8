import { sharedArray } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { Bucket, type BucketSlot, IN_PLACE_MIN_ELEMENTS } from './bucket.js';

/**
 * Splits parameters (given in the order their gradients are expected: reverse registration
 * order at first, then the observed order) into buckets, PyTorch's
 * compute_bucket_assignment_by_size: a bucket closes once it holds at least its limit,
 * the first limit being firstCapBytes and the others capBytes.
 */
export function assignBuckets(sizes: readonly number[], firstCapBytes: number, capBytes: number): number[][] {
  const buckets: number[][] = [];
  let current: number[] = [];
  let bytes = 0;
  for (let i = 0; i < sizes.length; i++) {
    current.push(i);
    bytes += sizes[i] * 4;
    if (bytes >= (buckets.length === 0 ? firstCapBytes : capBytes)) {
      buckets.push(current);
      current = [];
      bytes = 0;
    }
  }
  if (current.length > 0) buckets.push(current);
  return buckets;
}

/** Every parameter's gradient, once: the shared memory all buckets are views of, whatever their layout. */
export const bucketArena = (params: readonly { param: Parameter }[]): Float32Array =>
  sharedArray(
    Float32Array,
    params.reduce((n, { param }) => n + param.size, 0),
  );

/**
 * Builds the buckets for the parameters in `order` (indices into params), each a view of
 * its stretch of `arena` (rebuilding the buckets allocates no new shared memory).
 */
export function buildBuckets(
  params: readonly { name: string; param: Parameter }[],
  order: readonly number[],
  firstCapBytes: number,
  capBytes: number,
  arena: Float32Array,
): Bucket[] {
  const sizes = order.map((i) => params[i].param.size);
  const groups = assignBuckets(sizes, firstCapBytes, capBytes);
  let start = 0;
  return groups.map((members, b) => {
    const small = (m: number) => params[order[m]].param.size < IN_PLACE_MIN_ELEMENTS;
    let offset = 0;
    const at = new Map(
      [...members.filter(small), ...members.filter((m) => !small(m))].map((m) => {
        const start = offset;
        offset += params[order[m]].param.size;
        return [m, start];
      }),
    );
    const slots = members.map((m): BucketSlot => {
      const index = order[m];
      const { name, param } = params[index];
      return { name, param, index, offset: at.get(m)!, size: param.size, shape: [...param.shape] };
    });
    const buffer = arena.subarray(start, start + offset);
    start += offset;
    return new Bucket(b, slots, b === groups.length - 1, buffer);
  });
}
