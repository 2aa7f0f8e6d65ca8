import type { tf } from '@ddp/tensor';
import { type AutocastDtype, autocast, autocastDtype } from './autocast.js';
import { backward } from './engine.js';
import { AutogradArgumentError } from './errors.js';
import { AutogradFunction } from './function.js';
import { enableGrad, isGradEnabled, noGrad } from './grad-mode.js';
import type { Context } from './node.js';
import { getRngState, setRngState } from './random.js';
import { tidy } from './scope.js';
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
  private precision: AutocastDtype | null = null;

  forward(ctx: Context, segment: Segment, ...inputs: tf.Tensor[]): tf.Tensor {
    this.segment = segment;
    this.rng = snapshot();
    this.precision = autocastDtype();
    ctx.saveForBackward(...inputs);
    const out = noGrad(() => tidy(() => segment(...inputs.map((x) => new Tensor(x.clone())))));
    if (!(out instanceof Tensor)) throw new AutogradArgumentError('checkpoint: the segment must return one Tensor');
    const data = out.data.clone();
    out.dispose();
    return data;
  }

  async backward(ctx: Context, dy: tf.Tensor) {
    const inputs = ctx.savedTensors.map(
      (x, i) => new Tensor(x.clone(), { requiresGrad: ctx.needsInputGrad[i + 1] ?? false }),
    );
    const rngNow = snapshot();
    restore(this.rng); // replay the same dropout masks
    let out: Tensor;
    try {
      // torch's checkpoint recomputes under the forward's autocast: under backward's own (none, usually) a
      // bfloat16 forward was recomputed in float32, and the gradients were another computation's
      const recompute = () => enableGrad(() => tidy(() => this.segment(...inputs)));
      const precision = this.precision;
      out = autocast({ dtype: precision ?? undefined, enabled: precision !== null }, recompute);
    } catch (error) {
      for (const x of inputs) x.dispose(); // a recomputation that throws leaked them (probe BA)
      throw error;
    } finally {
      restore(rngNow);
    }
    try {
      if (out.requiresGrad) await backward(out, dy, {});
      return [null, ...inputs.map((x) => (x.requiresGrad && x.grad ? x.grad.clone() : null))];
    } finally {
      out.dispose();
      for (const x of inputs) x.dispose();
    }
  }
}

/**
 * Like torch.utils.checkpoint: runs `segment(...inputs)` without keeping its activations and
 * recomputes it during backward. Leaves the segment captures (parameters) receive their
 * gradients, and fire their hooks, during that recomputation's backward; pass a leaf as an
 * input if it is also used outside the segment and must fire its hooks only once. The segment
 * must be synchronous and return one Tensor; dropout masks are replayed. When no input requires
 * grad the graph would have no edge into the segment, so it runs plainly (recorded, no saving).
 */
export function checkpoint(segment: Segment, ...inputs: Tensor[]): Tensor {
  // a number or an array (torch takes them) failed untyped: `t.clone is not a function`
  const other = inputs.findIndex((x) => !(x instanceof Tensor));
  if (other >= 0) {
    throw new AutogradArgumentError(
      `checkpoint: input ${other} is not a Tensor; close over other values in the segment instead`,
    );
  }
  if (!isGradEnabled() || !inputs.some((x) => x.requiresGrad)) return segment(...inputs);
  return Checkpoint.apply(segment, ...inputs);
}
