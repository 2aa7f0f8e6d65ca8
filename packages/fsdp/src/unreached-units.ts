import { AutogradFunction, type Context, queueCallback, type Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import type { tf } from '@ddp/tensor';
import type { FlatShard } from './flat-shard.js';
import { accumulate } from './gradient-reduction.js';

/** What the end-of-backward pass needs of a unit. */
export interface UnitGradientState {
  readonly flat: FlatShard | null;
  /** Gradients are reduce-scattered in this backward (set_requires_gradient_sync). */
  readonly syncsGradients: boolean;
  /** Its backward ran in the current backward and reduce-scattered its gradients. */
  reducedThisBackward: boolean;
}

/**
 * A unit the synced backward did not reach never starts its reduce-scatter, so full gradients it
 * accumulated under no-sync stayed on its parameters: lost to this step and added into the next
 * one's (silently). Once backward's graph is done, the ranks agree (one small MAX all-reduce)
 * on which units hold such gradients anywhere and reached no rank's backward, and reduce-scatter
 * those on every rank (zeros where a rank holds none), as FSDP2's final callback does.
 */
async function reduceUnreached(units: readonly UnitGradientState[], group: ProcessGroup): Promise<void> {
  const syncing = units.filter((u) => u.flat && u.syncsGradients);
  const flags = new Int32Array(2 * syncing.length);
  for (const [i, u] of syncing.entries()) {
    flags[2 * i] = u.reducedThisBackward ? 1 : 0;
    flags[2 * i + 1] = u.flat!.params.some((p) => p.grad !== null) ? 1 : 0;
  }
  for (const u of units) u.reducedThisBackward = false;
  if (syncing.length === 0) return;
  await group.allReduce(flags, { op: ReduceOp.MAX }).wait();
  for (const [i, u] of syncing.entries()) {
    if (flags[2 * i] === 0 && flags[2 * i + 1] === 1) accumulate(u.flat!.shards, await u.flat!.reduceScatterGrads());
  }
}

/** Identity on the root's output; its backward, the first of a backward, queues reduceUnreached. */
class BackwardEnd extends AutogradFunction {
  private atEnd: () => Promise<void> = async () => {};

  forward(_ctx: Context, atEnd: () => Promise<void>, output: tf.Tensor): tf.Tensor {
    this.atEnd = atEnd;
    return output;
  }

  backward(_ctx: Context, grad: tf.Tensor) {
    queueCallback(this.atEnd);
    return [null, grad.clone()];
  }
}

/**
 * The root's output, with the end-of-backward pass for `units` attached; only once a unit has
 * trained without gradient sync (every rank sets it alike, so every rank attaches it alike).
 */
export function withUnreachedReduction(
  output: Tensor,
  units: readonly UnitGradientState[],
  group: ProcessGroup,
): Tensor {
  return BackwardEnd.apply(() => reduceUnreached(units, group), output);
}
