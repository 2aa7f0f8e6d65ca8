import type { tf } from '@ddp/tensor';
import { type AutocastOptions, autocast, autocastRegion } from './autocast.js';
import { recordingReads, withCapturedValues } from './data-reads.js';
import { backward } from './engine.js';
import { AutogradArgumentError, GraphFreedError } from './errors.js';
import { AutogradFunction } from './function.js';
import { enableGrad, isGradEnabled, noGrad } from './grad-mode.js';
import type { Context, Node } from './node.js';
import { getRngState, setRngState } from './random.js';
import { tidy, tidyMade } from './scope.js';
import { Tensor } from './tensor.js';

type Segment = (...inputs: Tensor[]) => Tensor;

/** Random state a recomputed segment must replay (dropout masks): read it, and restore it. */
export interface RngStateSource {
  get(): unknown;
  set(state: unknown): void;
}

const rngSources: RngStateSource[] = [{ get: getRngState, set: (s) => setRngState(s as number) }];

/**
 * Registers a random generator that checkpoint() must snapshot before a segment's forward and
 * restore while recomputing it (like torch's preserve_rng_state). autograd's own stream (dropout
 * masks, unseeded randn and rand) is registered already. Returns a function that unregisters it.
 */
export function registerCheckpointRngState(source: RngStateSource): () => void {
  rngSources.push(source);
  return () => {
    const i = rngSources.indexOf(source);
    if (i >= 0) rngSources.splice(i, 1);
  };
}
const snapshot = (): unknown[] => rngSources.map((s) => s.get());
function restore(states: unknown[]): void {
  for (const [i, s] of rngSources.entries()) s.set(states[i]);
}

/** Runs a segment without recording it; its backward recomputes it and backwards through that. */
class Checkpoint extends AutogradFunction {
  private segment: Segment = () => {
    throw new Error('unset');
  };
  private rng: unknown[] = [];
  /** The forward's autocast: the recomputation runs under it, whatever autocast backward is called in. */
  private precision: Required<AutocastOptions> = autocastRegion();
  /**
   * Tensors from outside the segment it read, but trainable leaves (read live, as parameters are): their
   * values are saved after the inputs', and the recomputation reads those (a `tidy` disposed them since).
   */
  private captured: Tensor[] = [];
  /** The captured non-leaves' nodes, held until this node goes: the recomputation backwards through them. */
  private held: Node[] = [];

  forward(ctx: Context, segment: Segment, ...inputs: tf.Tensor[]): tf.Tensor {
    this.segment = segment;
    this.rng = snapshot();
    this.precision = autocastRegion();
    const reads = new Set<Tensor>();
    const run = () => segment(...inputs.map((x) => new Tensor(x.clone())));
    const { result: out, made } = noGrad(() => tidyMade(() => recordingReads(reads, run)));
    if (!(out instanceof Tensor)) throw new AutogradArgumentError('checkpoint: the segment must return one Tensor');
    // the segment's own tensors are disposed by now
    this.captured = [...reads].filter((t) => t !== out && !t.isDisposed && !(t.isLeaf && t.requiresGrad));
    ctx.saveForBackward(...inputs, ...this.captured.map((t) => t.data));
    this.held = this.captured.flatMap((t) => (t.gradFn ? [t.gradFn] : []));
    for (const node of this.held) node.addRef();
    const data = out.data.clone();
    if (made) out.dispose(); // not a tensor from outside handed back: the caller's (probe CP)
    return data;
  }

  override onRelease(): void {
    for (const node of this.held) node.releaseRef();
    this.held = [];
  }

  async backward(ctx: Context, dy: tf.Tensor) {
    const n = ctx.savedTensors.length - this.captured.length;
    const values = new Map(this.captured.map((t, i) => [t, ctx.savedTensors[n + i]]));
    const inputs = ctx.savedTensors
      .slice(0, n)
      .map((x, i) => new Tensor(x.clone(), { requiresGrad: ctx.needsInputGrad[i + 1] ?? false }));
    const rngNow = snapshot();
    restore(this.rng); // replay the same dropout masks
    let out: Tensor;
    let made: boolean;
    try {
      // torch's checkpoint recomputes under the forward's autocast region (its dtype even when disabled): under
      // backward's own a bfloat16 forward was recomputed in float32, and the gradients were another computation's
      const recompute = () =>
        enableGrad(() => tidyMade(() => withCapturedValues(values, () => this.segment(...inputs))));
      ({ result: out, made } = autocast(this.precision, recompute));
    } catch (error) {
      for (const x of inputs) x.dispose(); // a recomputation that throws leaked them (probe BA)
      throw error;
    } finally {
      restore(rngNow);
    }
    try {
      if (out.requiresGrad)
        await backward(out, dy, { retainGraph: ctx.retainsGraph }).catch((error: unknown) =>
          refuseSharedCapture(error, this.held),
        );
      return [null, ...inputs.map((x) => (x.requiresGrad && x.grad ? x.grad.clone() : null))];
    } finally {
      if (made) out.dispose();
      for (const x of inputs) x.dispose();
    }
  }
}

/**
 * The recomputation backwards through a captured non-leaf's own graph: one that is also used outside
 * the segment (or by another segment) was claimed by that backward first. Says so, and what to do.
 */
function refuseSharedCapture(error: unknown, held: readonly Node[]): never {
  if (!(error instanceof GraphFreedError) || held.length === 0) throw error;
  throw new AutogradArgumentError(
    'checkpoint: its segment reads a tensor computed outside it that requires grad ' +
      `(made by ${held.map((n) => n.name).join(', ')}) ` +
      'and that is used outside the segment too: the recomputation reached its graph a second time; pass that ' +
      'tensor as an input (checkpoint(segment, x, h))',
  );
}

/**
 * Like torch.utils.checkpoint: runs `segment(...inputs)` without keeping its activations and
 * recomputes it during backward. Leaves the segment captures (parameters) receive their
 * gradients, and fire their hooks, during that recomputation's backward; pass a leaf as an
 * input if it is also used outside the segment and must fire its hooks only once. The segment
 * must be synchronous and return one Tensor; dropout masks are replayed. Other tensors it captures
 * read in the recomputation as they were at its forward when disposed since (a `tidy` around the
 * step), live otherwise. When no input requires grad the graph would have no edge into the segment,
 * so it runs plainly (recorded, no saving).
 */
export function checkpoint(segment: Segment, ...inputs: Tensor[]): Tensor {
  // a number or an array (torch takes them) failed untyped: `t.clone is not a function`
  const other = inputs.findIndex((x) => !(x instanceof Tensor));
  if (other >= 0) {
    throw new AutogradArgumentError(
      `checkpoint: input ${other} is not a Tensor; close over other values in the segment instead`,
    );
  }
  // in tidy as the recorded path's forward: its intermediates leaked here (probe CM)
  if (!isGradEnabled() || !inputs.some((x) => x.requiresGrad)) return tidy(() => segment(...inputs));
  return Checkpoint.apply(segment, ...inputs);
}
