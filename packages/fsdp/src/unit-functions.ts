import { AutogradFunction, type Context } from '@ddp/autograd';
import type { tf } from '@ddp/tensor';

/** What the autograd Functions around a resharded unit call back into. */
export interface ShardedUnit {
  /** Gathers the unit's parameters for its backward (and prefetches the unit before it). */
  gatherForBackward(): Promise<void>;
  /** The unit's backward is done: starts its gradients' reduce-scatter, frees its parameters. */
  finishBackward(): Promise<void>;
}

/**
 * Identity on the unit's inputs, with one of the unit's shards as an extra input: the graph always has
 * an edge into the unit (even when no input requires grad), and this backward runs after the
 * unit's whole backward, so it starts the reduce-scatter of the parameters' gradients; the
 * shards' gradients are added to their `grad` when backward ends (gradient-reduction.ts).
 */
export class EnterUnit extends AutogradFunction {
  private unit: ShardedUnit | null = null;

  forward(_ctx: Context, unit: ShardedUnit, _shard: tf.Tensor, ...inputs: tf.Tensor[]): tf.Tensor[] {
    this.unit = unit;
    return inputs;
  }

  async backward(ctx: Context, ...grads: tf.Tensor[]) {
    await this.unit!.finishBackward();
    return [null, null, ...grads.map((g, i) => (ctx.needsInputGrad[i + 2] ? g.clone() : null))];
  }
}

/** Identity on the unit's output whose backward gathers the unit's parameters before the unit's backward runs. */
export class LeaveUnit extends AutogradFunction {
  private unit: ShardedUnit | null = null;

  forward(_ctx: Context, unit: ShardedUnit, output: tf.Tensor): tf.Tensor {
    this.unit = unit;
    return output;
  }

  async backward(_ctx: Context, grad: tf.Tensor) {
    await this.unit!.gatherForBackward();
    return [null, grad.clone()];
  }
}
