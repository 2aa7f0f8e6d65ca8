import { checkBooleanOptions, tf } from '@ddp/tensor';
import { traceRead, tracingReads } from './data-reads.js';
import { type BackwardOptions, backward } from './engine.js';
import { AutogradArgumentError, argumentError, TensorDisposedError } from './errors.js';
import {
  AccumulateGrad,
  addHook,
  type Node,
  type PostAccumulateGradHook,
  type RemovableHandle,
  type TensorHook,
} from './node.js';
import { trackTensor } from './scope.js';

export type { RemovableHandle };

/**
 * How many Tensors hold each gradient as their `.grad` (`p.grad = q.grad` shares one, as torch):
 * the last to let go frees it. One owner freeing it left the other a disposed gradient: an
 * untyped TypeError in its next backward.
 */
const gradHolders = new WeakMap<tf.Tensor, number>();

/**
 * A tf.Tensor plus autograd state, like torch.Tensor. The Tensor owns `data` and `grad`:
 * dispose() frees both; assigning `grad` disposes the previous gradient (unless another Tensor
 * holds it too).
 */
export class Tensor {
  private _data: tf.Tensor | null;
  private _grad: tf.Tensor | null = null;
  private _requiresGrad: boolean;
  private accumulator: AccumulateGrad | null = null;
  private disposedBy = 'dispose()';
  /** What a tensor freed with keepShape still reports (an FSDP parameter between its gathers, as torch's DTensor). */
  private freedShape: number[] | null = null;
  private retainingGrad = false;
  /** The node that produced this tensor (null for leaves). */
  gradFn: Node | null = null;
  /** Which output of gradFn this tensor is. */
  outputIndex = 0;
  /** When true, backward() does not free this intermediate's data. */
  retained = false;
  readonly hooks: TensorHook[] = [];
  readonly postAccumulateGradHooks: PostAccumulateGradHook[] = [];

  constructor(data: tf.Tensor, opts: { requiresGrad?: boolean } = {}) {
    checkBooleanOptions('Tensor', opts, ['requiresGrad'], argumentError);
    this._data = data;
    this._requiresGrad = opts.requiresGrad ?? false;
    if (this._requiresGrad && data.dtype !== 'float32') {
      data.dispose(); // the Tensor took ownership of it
      throw new AutogradArgumentError(`only float32 tensors can require grad (got ${data.dtype})`);
    }
    trackTensor(this);
  }

  get data(): tf.Tensor {
    const gone = this._data === null || this._data.isDisposed;
    // checkpoint's (data-reads.ts): a captured tensor gone since its forward reads as it was then
    const captured = tracingReads ? traceRead(this) : undefined;
    if (gone && captured) return captured;
    if (gone) throw new TensorDisposedError(this.disposedBy);
    return this._data!;
  }

  /**
   * Replaces the data in place (optimizers); disposes the old data. Shape may not change
   * (AutogradArgumentError: an update broadcast against a wrong gradient reshaped the parameter
   * silently). A freed tensor (an FSDP parameter between its unit's gathers) refuses: the next
   * gather overwrote the value, and the write was lost without a word. Its owner brings it back
   * with `restore`.
   */
  set data(value: tf.Tensor) {
    if (this._data === null) throw new TensorDisposedError(this.disposedBy);
    if (!tf.util.arraysEqual(value.shape, this._data.shape)) {
      throw new AutogradArgumentError(
        `assigned data of shape [${value.shape}] to ${this}: data may not change shape; make a new Tensor ` +
          '(or Parameter) for another shape',
      );
    }
    // was taken, then backward advised casting the float gradient to int32 (probe AS; torch refuses it here)
    if (this.requiresGrad && value.dtype !== 'float32')
      throw new AutogradArgumentError(`only float32 tensors can require grad: data of ${value.dtype} given`);
    if (this._data !== value) this._data.dispose();
    this._data = value;
  }

  /** Gives a freed tensor its data again (FSDP's gather), of any shape; as the data setter otherwise. */
  restore(value: tf.Tensor): void {
    if (this._data !== null && this._data !== value) this._data.dispose();
    this._data = value;
    this.freedShape = null;
  }

  get isDisposed(): boolean {
    const gone = this._data === null || this._data.isDisposed;
    return gone && !(tracingReads && traceRead(this));
  }

  /** Why the data is gone (free's reason, or 'dispose()'), or null while it is there. */
  get freedBy(): string | null {
    return this.isDisposed ? this.disposedBy : null;
  }

  get requiresGrad(): boolean {
    return this._requiresGrad || this.gradFn !== null;
  }

  set requiresGrad(value: boolean) {
    // a string ('false') was truthy: the leaf took gradients and stepped while meant frozen
    checkBooleanOptions('Tensor', { requiresGrad: value }, ['requiresGrad'], argumentError);
    if (this.gradFn !== null && !value) {
      throw new AutogradArgumentError('requiresGrad can only be changed on leaf tensors; use detach()');
    }
    // as the constructor: an int32 leaf took float gradients (torch raises the same)
    if (value && this.data.dtype !== 'float32') {
      throw new AutogradArgumentError(`only float32 tensors can require grad (got ${this.data.dtype})`);
    }
    this._requiresGrad = value;
  }

  /** Sets requiresGrad in place and returns this, like torch's requires_grad_(). */
  requiresGrad_(value = true): this {
    this.requiresGrad = value;
    return this;
  }

  get isLeaf(): boolean {
    return this.gradFn === null;
  }

  /**
   * The accumulated gradient of a leaf, or of a non-leaf after retainGrad() (borrowed: do not
   * dispose it, assign null instead).
   */
  get grad(): tf.Tensor | null {
    return this._grad;
  }

  /**
   * Takes `value` as the gradient; it must have the data's shape and dtype, as torch checks (a
   * [2, 1] gradient on a [3] parameter became its .grad, and SGD's step broadcast the parameter
   * to [2, 3]). A freed tensor's shape is unknown until restored: not checked. An autograd Tensor
   * (torch's `p.grad = torch.zeros_like(p)`) gives a copy of its data (it was taken, and the step
   * crashed in tfjs).
   */
  set grad(given: tf.Tensor | Tensor | null) {
    const value = given instanceof Tensor ? given.data.clone() : given;
    if (value === this._grad) return;
    if (value !== null) {
      try {
        this.checkGrad(value);
      } catch (error) {
        if (value !== given) value.dispose(); // the copy made above
        throw error;
      }
      gradHolders.set(value, (gradHolders.get(value) ?? 0) + 1);
    }
    const old = this._grad;
    this._grad = value;
    if (old === null) return;
    const holders = (gradHolders.get(old) ?? 1) - 1;
    if (holders > 0) gradHolders.set(old, holders);
    else {
      gradHolders.delete(old);
      old.dispose();
    }
  }

  private checkGrad(value: tf.Tensor): void {
    if (this.isDisposed) return;
    if (!tf.util.arraysEqual(value.shape, this.shape)) {
      throw new AutogradArgumentError(
        `assigned grad has data of a different size: [${value.shape}] for ${this}; assign a gradient of ` +
          "the tensor's shape (sum a broadcast one down to it)",
      );
    }
    if (value.dtype !== this.dtype) {
      throw new AutogradArgumentError(
        `assigned grad has data of a different type: ${value.dtype} for ${this} of dtype ${this.dtype}; ` +
          `cast it first (tf.cast(grad, '${this.dtype}'))`,
      );
    }
  }

  get shape(): number[] {
    if (this.freedShape !== null && this.isDisposed) return [...this.freedShape];
    return this.data.shape;
  }
  get dtype(): tf.DataType {
    return this.data.dtype;
  }
  get rank(): number {
    return this.freedShape !== null && this.isDisposed ? this.freedShape.length : this.data.rank;
  }
  get size(): number {
    return this.freedShape !== null && this.isDisposed ? this.freedShape.reduce((a, b) => a * b, 1) : this.data.size;
  }

  /** A new leaf sharing no graph with this one (its own handle on the same values). */
  detach(): Tensor {
    return new Tensor(this.data.clone());
  }

  /** Keeps this intermediate's data alive through backward(); returns this. */
  retain(): this {
    this.retained = true;
    return this;
  }

  /** Whether backward stores this non-leaf's gradient in `.grad` (retainGrad()). */
  get retainsGrad(): boolean {
    return this.retainingGrad;
  }

  /**
   * Makes backward store this non-leaf's gradient in `.grad`, as torch's retain_grad(): each backward through
   * it adds to it, as a leaf's accumulates (assign null to start over). It is the gradient as the hooks
   * registered before this call left it (torch 1.13's order). A no-op on a leaf. Returns this.
   */
  retainGrad(): this {
    if (!this.requiresGrad) throw new AutogradArgumentError("can't retainGrad() on a tensor that doesn't require grad");
    if (this.isLeaf || this.retainingGrad) return this;
    this.retainingGrad = true;
    // the hook's argument is the engine's, freed after the hooks: .grad takes a copy; none once disposed (a tidy's
    // intermediate: nobody could read it, nothing would free it; probe AY)
    this.hooks.push((g) => {
      if (this.isDisposed) return;
      this.grad = this._grad === null ? g.clone() : tf.add(this._grad, g);
    });
    return this;
  }

  item(): number {
    if (this.size !== 1)
      throw new AutogradArgumentError(`item() needs a one-element tensor, got shape [${this.shape}]`);
    return this.data.dataSync()[0];
  }
  dataSync(): tf.TypedArray {
    return this.data.dataSync() as tf.TypedArray;
  }
  async array(): Promise<unknown> {
    return this.data.array();
  }
  arraySync(): unknown {
    return this.data.arraySync();
  }
  toString(): string {
    return `Tensor(shape=[${this.isDisposed ? '?' : this.shape}], requiresGrad=${this.requiresGrad}${
      this.gradFn ? `, gradFn=${this.gradFn.name}` : ''
    })`;
  }

  /** Frees data and grad. Idempotent. */
  dispose(): void {
    this.free('dispose()');
    this.grad = null;
  }

  /**
   * Frees data only (backward uses this on intermediates); the graph node loses this reference.
   * `keepShape`: shape, rank and size still answer (grouping parameters by ndim while resharded).
   */
  free(reason: string, { keepShape = false } = {}): void {
    if (this._data === null) return;
    this.freedShape = keepShape ? [...this._data.shape] : null;
    this._data.dispose();
    this._data = null;
    this.disposedBy = reason;
    this.gradFn?.releaseRef();
  }

  /** The leaf's gradient accumulator node, created on first use. */
  gradAccumulator(): AccumulateGrad {
    if (!this.isLeaf || !this._requiresGrad) throw new AutogradArgumentError('only leaves requiring grad accumulate');
    this.accumulator ??= new AccumulateGrad(this);
    return this.accumulator;
  }

  /** Registers a hook on the gradient w.r.t. this tensor; it may return a replacement. */
  registerHook(hook: TensorHook): RemovableHandle {
    if (!this.requiresGrad)
      throw new AutogradArgumentError("can't register a hook on a tensor that doesn't require grad");
    return addHook(this.hooks, hook);
  }

  /** Registers a hook that fires on a leaf after its .grad has been accumulated. */
  registerPostAccumulateGradHook(hook: PostAccumulateGradHook): RemovableHandle {
    if (!this.isLeaf || !this._requiresGrad) {
      throw new AutogradArgumentError('post-accumulate-grad hooks can only be registered on leaves that require grad');
    }
    return addHook(this.postAccumulateGradHooks, hook);
  }

  /** Computes gradients of this tensor w.r.t. the graph leaves. See the package README. */
  backward(grad?: tf.Tensor | Tensor, opts: BackwardOptions = {}): Promise<void> {
    return backward(this, grad, opts);
  }
}
