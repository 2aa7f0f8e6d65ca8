import { tf } from '@ddp/tensor';
import { backward } from './engine.js';
import { AutogradArgumentError } from './errors.js';
import { Function } from './function.js';
import { enableGrad, noGrad } from './grad-mode.js';
import type { Context } from './node.js';
import { getRngState, setRngState } from './ops/dropout.js';
import { tidy } from './scope.js';
import { Tensor } from './tensor.js';

type Segment = (...inputs: Tensor[]) => Tensor;

/** Runs a segment without recording it; its backward recomputes it and backwards through that. */
class Checkpoint extends Function {
  override readonly asyncBackward = true;
  private segment: Segment = () => {
    throw new Error('unset');
  };
  private rng = 0;

  forward(ctx: Context, segment: Segment, ...inputs: tf.Tensor[]): tf.Tensor {
    this.segment = segment;
    this.rng = getRngState();
    ctx.saveForBackward(...inputs);
    const out = noGrad(() => tidy(() => segment(...inputs.map((x) => new Tensor(x.clone())))));
    if (!(out instanceof Tensor)) throw new AutogradArgumentError('checkpoint: the segment must return one Tensor');
    const data = out.data.clone();
    out.dispose();
    return data;
  }

  async backward(ctx: Context, dy: tf.Tensor) {
    const inputs = ctx.savedTensors.map((x, i) => new Tensor(x.clone(), { requiresGrad: ctx.needsInputGrad[i + 1] ?? false }));
    const rngNow = getRngState();
    setRngState(this.rng); // replay the same dropout masks
    const out = enableGrad(() => tidy(() => this.segment(...inputs)));
    setRngState(rngNow);
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
 * must be synchronous and return one Tensor; dropout masks are replayed.
 */
export function checkpoint(segment: Segment, ...inputs: Tensor[]): Tensor {
  return Checkpoint.apply(segment, ...inputs);
}
