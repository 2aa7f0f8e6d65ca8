import { tf } from '@ddp/tensor';
import { refuseValuesBeingWritten } from './backward-run.js';
import { AutogradArgumentError, refusePromises } from './errors.js';
import { isGradEnabled } from './grad-mode.js';
import { Context, type Edge, Node } from './node.js';
import { Tensor } from './tensor.js';

/** What a backward returns: one gradient per forward argument (null where none is needed). */
export type GradResult = tf.Tensor | null | (tf.Tensor | null | undefined)[];
type ForwardResult = tf.Tensor | tf.Tensor[];

/**
 * A differentiable operation, like torch.autograd.Function. Subclass it and define
 * `forward(ctx, ...args)` (Tensor arguments arrive as tf.Tensors, the rest as given) and
 * `backward(ctx, ...gradOutputs)`, returning one gradient per forward argument. Call it with
 * `MyFn.apply(...args)`. A synchronous backward runs inside tf.tidy, so temporaries need no
 * disposal; an `async backward` (collectives) owns its temporaries. A non-async backward that
 * returns a promise must set `asyncBackward = true`.
 */
export abstract class AutogradFunction {
  readonly asyncBackward: boolean = false;

  /** Whether backward returns a promise (so it cannot run inside tf.tidy). */
  get backwardIsAsync(): boolean {
    return this.asyncBackward || this.backward.constructor.name === 'AsyncFunction';
  }

  abstract forward(ctx: Context, ...args: unknown[]): ForwardResult | Promise<ForwardResult>;
  abstract backward(ctx: Context, ...gradOutputs: tf.Tensor[]): GradResult | Promise<GradResult>;

  /**
   * Called once when this application's graph node is freed: after its backward, or when nothing
   * can reach it any more (its outputs disposed unbackwarded). For state a Function keeps outside
   * its context (DataParallel's replicas hold their forward's graph until then).
   */
  onRelease?(): void;

  /** Applies a Function whose forward is synchronous; returns a Tensor (or Tensor[] if forward does). */
  static apply<T extends Tensor | Tensor[] = Tensor>(this: new () => AutogradFunction, ...args: unknown[]): T {
    const fn = new this();
    const { ctx, unwrapped } = prepare(fn, args);
    let out: ForwardResult;
    try {
      out = tf.tidy(() => {
        const r = fn.forward(ctx, ...unwrapped);
        if (r instanceof Promise)
          throw new AutogradArgumentError(`${fn.constructor.name}: async forward needs applyAsync()`);
        return r;
      });
    } catch (error) {
      ctx.release(); // what forward saved before it threw escaped the tidy, kept for a backward never to come
      throw error;
    }
    return wrapOutputs(fn, ctx, args, unwrapped, out) as T;
  }

  /** Applies a Function whose forward is async (e.g. a collective). */
  static async applyAsync<T extends Tensor | Tensor[] = Tensor>(
    this: new () => AutogradFunction,
    ...args: unknown[]
  ): Promise<T> {
    const fn = new this();
    const { ctx, unwrapped } = prepare(fn, args);
    const out = await (async () => fn.forward(ctx, ...unwrapped))().catch((error: unknown) => {
      ctx.release();
      throw error;
    });
    return wrapOutputs(fn, ctx, args, unwrapped, out) as T;
  }
}

/** PyTorch's name for it: `class MyOp extends Function`. */
export { AutogradFunction as Function };

/** The graph node of one Function application. */
export class FunctionNode extends Node {
  constructor(
    readonly fn: AutogradFunction,
    readonly ctx: Context,
    next: (Edge | null)[],
    /** The output Tensors: their hooks run on incoming grads; backward frees their data. */
    readonly outputs: Tensor[],
    readonly outputShapes: number[][],
  ) {
    super(next);
  }
  get name(): string {
    return this.fn.constructor.name;
  }
  get numOutputs(): number {
    return this.outputs.length;
  }
  override releaseSaved(): void {
    if (!this.freed) this.fn.onRelease?.();
    this.ctx.release();
    super.releaseSaved();
  }
}

function prepare(fn: AutogradFunction, args: unknown[]): { ctx: Context; unwrapped: unknown[] } {
  refusePromises(fn.constructor.name, args);
  refuseValuesBeingWritten(fn.constructor.name, args);
  const recording = isGradEnabled();
  const needsInputGrad = args.map((a) => recording && a instanceof Tensor && a.requiresGrad);
  return { ctx: new Context(needsInputGrad), unwrapped: args.map((a) => (a instanceof Tensor ? a.data : a)) };
}

function edgeTo(t: Tensor): Edge {
  return t.gradFn === null
    ? { node: t.gradAccumulator(), outputIndex: 0 }
    : { node: t.gradFn, outputIndex: t.outputIndex };
}

function wrapOutputs(
  fn: AutogradFunction,
  ctx: Context,
  args: unknown[],
  unwrapped: unknown[],
  out: ForwardResult,
): Tensor | Tensor[] {
  const list = Array.isArray(out) ? out : [out];
  // A forward may hand back an input unchanged; give the output its own handle so ownership stays separate.
  const own = list.map((t) => (unwrapped.includes(t) ? t.clone() : t));
  const outputs = own.map((t) => new Tensor(t));
  if (ctx.recording) {
    const next = args.map((a, i) => (ctx.needsInputGrad[i] ? edgeTo(a as Tensor) : null));
    const node = new FunctionNode(
      fn,
      ctx,
      next,
      outputs,
      own.map((t) => t.shape),
    );
    for (const edge of next) edge?.node.addRef();
    for (const [i, t] of outputs.entries()) {
      if (t.dtype !== 'float32') continue; // integer outputs (indices, masks) carry no gradient
      t.gradFn = node;
      t.outputIndex = i;
      node.addRef();
    }
  }
  return Array.isArray(out) ? outputs : outputs[0];
}
