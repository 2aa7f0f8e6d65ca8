import { sharedArray } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';

/** Where one parameter's gradient lives inside its bucket's flat buffer. */
export interface BucketSlot {
  readonly name: string;
  readonly param: Parameter;
  /** Position of the parameter in DDP's parameter list (registration order). */
  readonly index: number;
  readonly offset: number;
  readonly size: number;
  readonly shape: readonly number[];
}

/**
 * A group of parameters whose gradients are all-reduced together, from one flat
 * SharedArrayBuffer-backed Float32Array (zero-copy on the comm thread).
 */
export class Bucket {
  readonly buffer: Float32Array;
  /** Parameters of this bucket not ready yet in the running backward. */
  pending: number;

  constructor(
    readonly index: number,
    readonly slots: readonly BucketSlot[],
  ) {
    const total = slots.reduce((n, s) => n + s.size, 0);
    this.buffer = sharedArray(Float32Array, total);
    this.pending = slots.length;
  }
}

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
    bytes += sizes[i]! * 4;
    if (bytes >= (buckets.length === 0 ? firstCapBytes : capBytes)) {
      buckets.push(current);
      current = [];
      bytes = 0;
    }
  }
  if (current.length > 0) buckets.push(current);
  return buckets;
}

/** Builds the buckets for the parameters in `order` (indices into params). */
export function buildBuckets(params: readonly { name: string; param: Parameter }[], order: readonly number[], firstCapBytes: number, capBytes: number): Bucket[] {
  const sizes = order.map((i) => params[i]!.param.size);
  return assignBuckets(sizes, firstCapBytes, capBytes).map((members, b) => {
    let offset = 0;
    const slots = members.map((m): BucketSlot => {
      const index = order[m]!;
      const { name, param } = params[index]!;
      const slot = { name, param, index, offset, size: param.size, shape: [...param.shape] };
      offset += param.size;
      return slot;
    });
    return new Bucket(b, slots);
  });
}
