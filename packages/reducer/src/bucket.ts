import { type ProcessGroup, sharedArray } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { copyTensorInto, tensorFromFloat32, tf, writeInPlace } from '@ddp/tensor';
import { type CommHook, type InPlaceCommHook, isInPlaceHook } from './comm-hooks.js';
import { DDPCommError, NonFiniteGradientError } from './errors.js';
import { allFinite, allFiniteOffThread, checkHeapUnmoved, sharedGradientView } from './heap-views.js';

/**
 * Gradients at least this large (256 KiB; DDP_IN_PLACE_MIN_BYTES, the same on every rank)
 * are reduced where they live, each in its own collective; smaller ones are copied together
 * into one flat array and reduced in one: a collective costs tens of microseconds, about
 * what copying 256 KiB in and out costs.
 */
export const IN_PLACE_MIN_ELEMENTS = Math.max(
  1,
  Math.ceil((Number(process.env.DDP_IN_PLACE_MIN_BYTES) || 262_144) / 4),
);

/** Where one parameter's gradient lives inside its bucket's flat buffer (the small ones first, together). */
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
  for (let i = 0; i < values.length; i++) values[i] *= scale;
}

/**
 * A group of parameters whose gradients are all-reduced together (picotron's Bucket): it
 * owns one iteration of its life. Gradients are noted as they become ready (`place`); once
 * full it launches its own comm hook (`launch`), whose all-reduce runs on the comm thread;
 * `reduced` awaits the averages and `writeBack` makes them the gradients. An in-place hook
 * (the default) gets each gradient's own storage as shared memory and reduces it there: no
 * copy. A hook that wants one flat buffer gets the gradients copied into `buffer`, a
 * SharedArrayBuffer, and the averages are copied back (DESIGN.md, "Where gradients live").
 */
export class Bucket {
  /** Slots not ready yet in the running backward. */
  private pending: number;
  private work: Promise<Float32Array | null> | null = null;
  /** This iteration's gradient of each placed slot (null: zeros), until launch. */
  private readonly placed = new Map<BucketSlot, tf.Tensor | null>();
  /** Per slot, the gradient's own storage when the hook reduced it in place (null: copied into `buffer`). */
  private readonly inPlace = new Map<BucketSlot, Float32Array>();
  /**
   * What an in-place hook reduces, the same count and lengths on every rank whatever each
   * holds: the small gradients' stretch of `buffer`, then each large gradient alone.
   */
  private readonly segments: readonly { offset: number; size: number; slot: BucketSlot | null }[];
  /** Clones keeping in-place gradients' storage allocated while the comm thread (or the finite check) uses it. */
  private held: tf.Tensor[] = [];
  /** Per in-place slot, whether its averages are finite (checked as soon as they are in: `launch`). */
  private readonly finite = new Map<BucketSlot, boolean>();

  /** `buffer`: this bucket's part of a shared-memory arena (a view; new buckets reuse the arena). */
  constructor(
    readonly index: number,
    readonly slots: readonly BucketSlot[],
    readonly isLast: boolean,
    readonly buffer: Float32Array,
  ) {
    this.pending = slots.length;
    const large = slots.filter((s) => s.size >= IN_PLACE_MIN_ELEMENTS);
    const small = slots.length - large.length;
    const smallSize = slots.reduce((n, s) => n + (s.size < IN_PLACE_MIN_ELEMENTS ? s.size : 0), 0);
    this.segments = [
      ...(small > 0 ? [{ offset: 0, size: smallSize, slot: null }] : []),
      ...large.map((slot) => ({ offset: slot.offset, size: slot.size, slot })),
    ];
  }

  /** Starts an iteration: no slot ready, nothing launched. */
  reset(): void {
    this.pending = this.slots.length;
    this.work = null;
    this.placed.clear();
    this.inPlace.clear();
    this.finite.clear();
  }

  /** Every slot holds its gradient for this iteration. */
  get full(): boolean {
    return this.pending === 0;
  }

  /** Notes a slot's final gradient for this iteration (null: zeros). */
  place(slot: BucketSlot, grad: tf.Tensor | null): void {
    this.placed.set(slot, grad);
    this.pending--;
  }

  /** Zeros in every slot (a joined rank's share of an iteration). */
  placeZeros(): this {
    this.reset();
    this.pending = 0;
    return this;
  }

  /** Copies a slot's gradient (null: zeros) into `buffer`: one copy, out of the backend's memory. */
  private copyIn(slot: BucketSlot): Float32Array {
    const grad = this.placed.get(slot) ?? null;
    const values = this.buffer.subarray(slot.offset, slot.offset + slot.size);
    if (grad === null) values.fill(0);
    else copyTensorInto(grad, this.buffer, slot.offset);
    return values;
  }

  /**
   * The arrays an in-place hook reduces (`segments`): a large gradient's own storage when the
   * comm thread can reach it and no other slot claimed it (two parameters may get the same
   * tensor), else copies in `buffer`.
   */
  private gradientsInPlace(claimed: Set<object>): Float32Array[] {
    for (const slot of this.slots) {
      const grad = this.placed.get(slot) ?? null;
      const large = slot.size >= IN_PLACE_MIN_ELEMENTS && grad !== null && !claimed.has(grad.dataId);
      const view = large ? sharedGradientView(grad) : null;
      if (view === null) {
        this.copyIn(slot);
        continue;
      }
      claimed.add(grad!.dataId);
      this.held.push(tf.keep(tf.clone(grad!))); // a dispose before the all-reduce ends must not free its memory
      this.inPlace.set(slot, view);
    }
    return this.segments.map(
      ({ offset, size, slot }) => (slot && this.inPlace.get(slot)) ?? this.buffer.subarray(offset, offset + size),
    );
  }

  private release(): void {
    tf.dispose(this.held);
    this.held = [];
  }

  /**
   * Calls the comm hook on this bucket; its collectives start now, on the comm thread.
   * `claimed`: the gradient storage other buckets reduce in place this iteration. With
   * `checkFinite`, the averages left in place are checked as soon as they are in, off the main thread.
   */
  launch<S>(
    hook: CommHook<S> | InPlaceCommHook<S>,
    state: S,
    processGroup: ProcessGroup,
    claimed: Set<object>,
    checkFinite: boolean,
  ): void {
    let work: Promise<Float32Array | null>;
    try {
      const { index, buffer, slots: parameters, isLast } = this;
      if (isInPlaceHook(hook)) {
        const arrays = this.gradientsInPlace(claimed);
        work = hook(state, { index, arrays, parameters, isLast, processGroup }).then(async () => {
          const slots = [...this.inPlace.keys()];
          const finite = checkFinite ? await allFiniteOffThread([...this.inPlace.values()]) : [];
          for (const [i, ok] of finite.entries()) this.finite.set(slots[i], ok);
          return null;
        });
      } else {
        for (const slot of this.slots) this.copyIn(slot);
        work = hook(state, { index, buffer, parameters, isLast, processGroup });
      }
    } catch (e) {
      work = Promise.reject(e);
    }
    work = work.finally(() => this.release());
    work.catch(() => {}); // awaited by `reduced`; an earlier bucket's failure may be reported first
    this.work = work;
  }

  /**
   * The averaged gradients as a flat array, or null when the hook left them in place (then
   * copied slots hold theirs in `buffer`); a failed collective becomes a DDPCommError naming
   * this bucket, a heap that moved under in-place gradients a GradientStorageMovedError.
   */
  async reduced(rank: number, iteration: number, buckets: number): Promise<Float32Array | null> {
    const result = await this.work!.catch((e: unknown) => {
      const names = this.slots.map((s) => s.name);
      const shown = `${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''}`;
      throw new DDPCommError(
        rank,
        `gradient all-reduce of bucket ${this.index} of ${buckets} (${shown})`,
        iteration,
        e,
      );
    });
    if (this.inPlace.size > 0) checkHeapUnmoved(rank, iteration);
    return result;
  }

  /**
   * Makes the averages the gradients: nothing to move for a gradient reduced in place; else
   * into each `grad`'s own storage when nothing else shares it (no new tensor, no
   * allocation), or into a new tensor. Globally unused parameters keep theirs. With
   * checkFinite, a NaN/Inf raises NonFiniteGradientError naming its parameter, on every
   * rank: the averages are the same everywhere.
   */
  writeBack(result: Float32Array | null, opts: WriteBackOptions): void {
    for (const slot of this.slots) {
      if (opts.usedAnywhere !== null && opts.usedAnywhere[slot.index] === 0) continue;
      const own = result === null ? (this.inPlace.get(slot) ?? null) : null;
      const values = own ?? (result ?? this.buffer).subarray(slot.offset, slot.offset + slot.size);
      if (opts.scale !== 1) scaleInPlace(values, opts.scale);
      const nonFinite = () =>
        new NonFiniteGradientError(slot.name, values.find((v) => !Number.isFinite(v))!, opts.iteration);
      if (own !== null) {
        // checked off the main thread once reduced (launch), unless scaled since
        const known = opts.scale === 1 ? this.finite.get(slot) : undefined;
        if (opts.checkFinite && !(known ?? allFinite(own))) throw nonFinite();
        continue;
      }
      const grad = slot.param.grad;
      const stored = grad === null ? null : writeInPlace(grad, values, { checkFinite: opts.checkFinite });
      if (opts.checkFinite && !(stored?.finite ?? allFinite(values))) throw nonFinite();
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
