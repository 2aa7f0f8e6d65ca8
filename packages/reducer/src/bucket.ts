import type { ProcessGroup } from '@ddp/comm';
import type { Parameter } from '@ddp/nn';
import { copyTensorInto, tensorFromFloat32, tf, writeInPlace } from '@ddp/tensor';
import { type CommHook, type InPlaceCommHook, isInPlaceHook } from './comm-hooks.js';
import { DDPCommError, DDPUsageError, NonFiniteGradientError } from './errors.js';
import { allFinite, checkHeapUnmoved, sharedGradientView, shareFiniteOffThread } from './heap-views.js';

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
  /** Whether this rank's share of the in-place slots' averages is finite (checked as soon as they are in: `launch`). */
  private shareFinite = true;

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
    this.shareFinite = true;
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
   * `checkFinite`, this rank's share of the averages left in place (shareFiniteOffThread) is
   * checked as soon as they are in, off the main thread.
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
        const { rank, size } = processGroup;
        work = hook(state, { index, arrays, parameters, isLast, processGroup }).then(async () => {
          if (checkFinite) this.shareFinite = await shareFiniteOffThread([...this.inPlace.values()], rank, size);
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
  async reduced(rank: number, iteration: number, buckets: number, underJoin: boolean): Promise<Float32Array | null> {
    const result = await this.work!.catch((e: unknown) => {
      throw new DDPCommError(
        rank,
        `gradient all-reduce of bucket ${this.index} of ${buckets} (${this.shownNames()})`,
        iteration,
        e,
        underJoin,
      );
    });
    if (this.inPlace.size > 0) checkHeapUnmoved(rank, iteration);
    // one short failed in the copy back as a bare RangeError; one longer was taken, its tail ignored
    if (result !== null && (!(result instanceof Float32Array) || result.length !== this.buffer.length)) {
      // its kind, not its values (String() of a Float64Array listed every one: megabytes of message)
      const kind = (result as object | undefined)?.constructor?.name ?? String(result);
      const length = (result as { length?: unknown } | undefined)?.length;
      const got = typeof length === 'number' ? `a ${kind} of ${length} values` : String(result);
      throw new DDPUsageError(
        `rank ${rank}: the comm hook returned ${got} for bucket ${this.index} of ${buckets} ` +
          `(${this.shownNames()}), whose buffer holds ${this.buffer.length}: a hook resolves with the averaged ` +
          'bucket.buffer, a Float32Array as long as it',
      );
    }
    return result;
  }

  /** The first few of the bucket's parameter names, for messages. */
  private shownNames(): string {
    const names = this.slots.map((s) => s.name);
    return `${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''}`;
  }

  /** A slot's averages: its gradient's own storage when reduced in place (`own`), else its stretch of the result. */
  private averagesOf(slot: BucketSlot, result: Float32Array | null) {
    const own = result === null ? (this.inPlace.get(slot) ?? null) : null;
    return { own, values: own ?? (result ?? this.buffer).subarray(slot.offset, slot.offset + slot.size) };
  }

  /**
   * Makes the averages the gradients: nothing to move for a gradient reduced in place; else
   * into each `grad`'s own storage when nothing else shares it (no new tensor, no
   * allocation), or into a new tensor. Globally unused parameters keep theirs. Returns
   * whether this rank found the averages finite (true without checkFinite): the copied ones
   * checked whole as they are written, those reduced in place by this rank's share, or whole
   * once scaled. The ranks then agree (writeBackAgreed, finite-agreement.ts).
   */
  writeBack(result: Float32Array | null, opts: WriteBackOptions): boolean {
    let finite = this.shareFinite || !opts.checkFinite;
    for (const slot of this.slots) {
      if (opts.usedAnywhere !== null && opts.usedAnywhere[slot.index] === 0) continue;
      const { own, values } = this.averagesOf(slot, result);
      if (opts.scale !== 1) scaleInPlace(values, opts.scale);
      if (own !== null) {
        // scaled since its share was checked: checked again, whole
        if (opts.checkFinite && opts.scale !== 1) finite = allFinite(own) && finite;
        continue;
      }
      const grad = slot.param.grad;
      const stored = grad === null ? null : writeInPlace(grad, values, { checkFinite: opts.checkFinite });
      if (opts.checkFinite) finite = (stored?.finite ?? allFinite(values)) && finite;
      if (!stored?.written) slot.param.grad = tensorFromFloat32(values, slot.shape);
    }
    return finite;
  }

  /**
   * The first of this bucket's gradients whose averages hold NaN or Infinity, each checked whole
   * (after writeBack, once some rank found one): the error naming it, or null.
   */
  nonFinite(result: Float32Array | null, opts: WriteBackOptions): NonFiniteGradientError | null {
    for (const slot of this.slots) {
      if (opts.usedAnywhere !== null && opts.usedAnywhere[slot.index] === 0) continue;
      const { values } = this.averagesOf(slot, result);
      const bad = allFinite(values) ? undefined : values.find((v) => !Number.isFinite(v));
      if (bad !== undefined) return new NonFiniteGradientError(slot.name, bad, opts.iteration);
    }
    return null;
  }
}
