import { type ProcessGroup, sharedArray } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { copyTensorInto, type tf, tensorFromFloat32, writeInPlace } from '@ddp/tensor';
import type { CommHook } from './comm-hooks.js';
import { DDPCommError, NonFiniteGradientError } from './errors.js';

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

/** How a bucket's averages become gradients (DistributedDataParallel's per-iteration agreement). */
export interface WriteBackOptions {
  /** Multiplies the averages (join: a divisor other than the world size). */
  scale: number;
  /** Per parameter, nonzero when some rank used it; null: all were (without findUnusedParameters). */
  usedAnywhere: Int32Array | null;
  checkFinite: boolean;
  iteration: number;
}

function scaleInPlace(values: Float32Array, scale: number): void {
  for (let i = 0; i < values.length; i++) values[i]! *= scale;
}

/**
 * A group of parameters whose gradients are all-reduced together (picotron's Bucket): it
 * owns one iteration of its life. Gradients are copied into its flat buffer as they become
 * ready (`place`, straight out of the backend's memory); once full it launches its own comm
 * hook (`launch`), whose all-reduce runs on the comm thread; `reduced` awaits the averages
 * and `writeBack` stores them into the gradients' own storage. The buffer is a
 * SharedArrayBuffer, the only memory the comm thread can reach, so the all-reduce works on
 * it in place (DESIGN.md, "Where gradients live").
 */
export class Bucket {
  /** Slots not ready yet in the running backward. */
  private pending: number;
  private work: Promise<Float32Array> | null = null;

  /** `buffer`: this bucket's part of a shared-memory arena (a view; new buckets reuse the arena). */
  constructor(
    readonly index: number,
    readonly slots: readonly BucketSlot[],
    readonly isLast: boolean,
    readonly buffer: Float32Array,
  ) {
    this.pending = slots.length;
  }

  /** Starts an iteration: no slot ready, nothing launched. */
  reset(): void {
    this.pending = this.slots.length;
    this.work = null;
  }

  /** Every slot holds its gradient for this iteration. */
  get full(): boolean {
    return this.pending === 0;
  }

  /** Copies a gradient (null: zeros) into its slot: one copy, out of the backend's memory. */
  place(slot: BucketSlot, grad: tf.Tensor | null): void {
    if (grad === null) this.buffer.fill(0, slot.offset, slot.offset + slot.size);
    else copyTensorInto(grad, this.buffer, slot.offset);
    this.pending--;
  }

  /** Zeros in every slot (a joined rank's share of an iteration). */
  placeZeros(): this {
    this.buffer.fill(0);
    this.pending = 0;
    return this;
  }

  /** Calls the comm hook on this bucket; its collectives start now, on the comm thread. */
  launch<S>(hook: CommHook<S>, state: S, processGroup: ProcessGroup): void {
    let work: Promise<Float32Array>;
    try {
      const { index, buffer, slots: parameters, isLast } = this;
      work = hook(state, { index, buffer, parameters, isLast, processGroup });
    } catch (e) {
      work = Promise.reject(e);
    }
    work.catch(() => {}); // awaited by `reduced`; an earlier bucket's failure may be reported first
    this.work = work;
  }

  /** The averaged gradients; a failed collective becomes a DDPCommError naming this bucket. */
  async reduced(rank: number, iteration: number, buckets: number): Promise<Float32Array> {
    try {
      return await this.work!;
    } catch (e) {
      const names = this.slots.map((s) => s.name);
      const shown = `${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''}`;
      const what = `gradient all-reduce of bucket ${this.index} of ${buckets} (${shown})`;
      throw new DDPCommError(rank, what, iteration, e);
    }
  }

  /**
   * Stores the averages as the gradients: into each `grad`'s own storage when nothing else
   * shares it (no new tensor, no allocation), else into a new tensor. Globally unused
   * parameters keep theirs. With checkFinite, a NaN/Inf (found in the same pass as the
   * copy) raises NonFiniteGradientError naming its parameter, on every rank: the averages
   * are the same everywhere.
   */
  writeBack(result: Float32Array, opts: WriteBackOptions): void {
    if (opts.scale !== 1) scaleInPlace(result, opts.scale);
    for (const slot of this.slots) {
      if (opts.usedAnywhere !== null && opts.usedAnywhere[slot.index] === 0) continue;
      const values = result.subarray(slot.offset, slot.offset + slot.size);
      const grad = slot.param.grad;
      const stored = grad === null ? null : writeInPlace(grad, values, { checkFinite: opts.checkFinite });
      if (opts.checkFinite && !(stored?.finite ?? values.every(Number.isFinite))) {
        throw new NonFiniteGradientError(slot.name, values.find((v) => !Number.isFinite(v))!, opts.iteration);
      }
      if (!stored?.written) slot.param.grad = tensorFromFloat32(values, slot.shape);
    }
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

/** Every parameter's gradient, once: the shared memory all buckets are views of, whatever their layout. */
export const bucketArena = (params: readonly { param: Parameter }[]): Float32Array =>
  sharedArray(Float32Array, params.reduce((n, { param }) => n + param.size, 0));

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
  const sizes = order.map((i) => params[i]!.param.size);
  const groups = assignBuckets(sizes, firstCapBytes, capBytes);
  let start = 0;
  return groups.map((members, b) => {
    let offset = 0;
    const slots = members.map((m): BucketSlot => {
      const index = order[m]!;
      const { name, param } = params[index]!;
      const slot = { name, param, index, offset, size: param.size, shape: [...param.shape] };
      offset += param.size;
      return slot;
    });
    const buffer = arena.subarray(start, start + offset);
    start += offset;
    return new Bucket(b, slots, b === groups.length - 1, buffer);
  });
}
