import { AutogradFunction, type Context, queueCallback, type Tensor } from '@ddp/autograd';
import { type ProcessGroup, ReduceOp } from '@ddp/comm';
import type { Module } from '@ddp/nn';
import type { tf } from '@ddp/tensor';
import { FSDPError, globalRank } from './errors.js';
import type { FlatShard } from './flat-shard.js';
import { accumulate } from './gradient-reduction.js';

/** What the end-of-backward pass needs of a unit. */
export interface UnitGradientState {
  readonly module: Module;
  readonly flat: FlatShard | null;
  /** Gradients are reduce-scattered in this backward (set_requires_gradient_sync). */
  readonly syncsGradients: boolean;
  /** Its backward ran in the current backward and reduce-scattered its gradients. */
  reducedThisBackward: boolean;
  /** false: it keeps its parameters until the end of backward, and reduces its gradients there. */
  readonly reshardAfterForward: boolean;
  /** Resharded and gathered for this backward, but no gradient reached its inputs: reduced at its end too. */
  readonly awaitingReduce: boolean;
  finishBackward(): Promise<void>;
}

/** Whether a backward through the root's output queued the end-of-backward pass (once per backward). */
export interface BackwardEndState {
  queued: boolean;
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
  if (syncing.length === 0) return;
  await group.allReduce(flags, { op: ReduceOp.MAX }).wait();
  for (const [i, u] of syncing.entries()) {
    if (flags[2 * i] === 0 && flags[2 * i + 1] === 1) accumulate(u.flat!.shards, await u.flat!.reduceScatterGrads());
  }
}

/**
 * After a synced backward every unit's full gradients went into its shards; one still holding a
 * gradient got it after its unit's reduce-scatter: the parameter was used outside its unit's forward
 * (the root multiplying by a block's weight itself), and that part of its gradient went into the
 * next step's, one step late (silently; probe AV). Every rank runs the same graph: all raise.
 */
function refuseLateGradients(units: readonly UnitGradientState[], group: ProcessGroup): void {
  for (const u of units) {
    // every backward passes here: the names (a traversal of the module) only once one is late
    if (!u.flat || !u.syncsGradients || u.flat.params.every((p) => p.grad === null)) continue;
    const late = u.module.namedParameters().filter(([, p]) => u.flat!.params.includes(p) && p.grad !== null);
    throw new FSDPError(
      `rank ${globalRank(group)}: ${late.map(([n]) => n).join(', ')} of the unit ${u.module.constructor.name} got ` +
        "gradient after the unit's reduce-scatter: a parameter used outside its unit's forward (the root " +
        'reading it directly) needs fullyShard(…, { reshardAfterForward: false }) on that unit, or use it ' +
        "only inside the unit's forward",
    );
  }
}

/** Identity on the root's output; its backward, the first of a backward, queues the end-of-backward pass once. */
class BackwardEnd extends AutogradFunction {
  private atEnd: () => Promise<void> = async () => {};
  private state: BackwardEndState = { queued: false };

  forward(_ctx: Context, atEnd: () => Promise<void>, state: BackwardEndState, output: tf.Tensor): tf.Tensor {
    [this.atEnd, this.state] = [atEnd, state];
    return output;
  }

  backward(_ctx: Context, grad: tf.Tensor) {
    // two root forwards under one backward (two views): one pass
    if (!this.state.queued) {
      this.state.queued = true;
      queueCallback(async () => {
        this.state.queued = false;
        await this.atEnd();
      });
    }
    return [null, null, grad.clone()];
  }
}

/**
 * The root's output, with the end-of-backward pass for `units` attached. There, on every rank alike,
 * the units that keep their parameters, and resharded ones no gradient reached the inputs of (an
 * Embedding's ids, a mask read without gradient: "got gradient after the unit's reduce-scatter",
 * falsely; probe CH), reduce-scatter their gradients in unit order (zeros where a rank's loss used
 * none of a unit's parameters: started from their parameters' hooks, such a unit was reduced on the
 * other ranks only, CollectiveMismatchError; probe W); then, once a unit has trained without
 * gradient sync (`unreached`: every rank sets it alike), reduceUnreached.
 */
export function withBackwardEnd(
  output: Tensor,
  units: readonly UnitGradientState[],
  group: ProcessGroup,
  unreached: boolean,
  state: BackwardEndState,
): Tensor {
  const atEnd = async () => {
    for (const u of units) if (u.flat && (!u.reshardAfterForward || u.awaitingReduce)) await u.finishBackward();
    if (unreached) await reduceUnreached(units, group);
    for (const u of units) u.reducedThisBackward = false;
    refuseLateGradients(units, group);
  };
  return BackwardEnd.apply(atEnd, state, output);
}
