import { queueCallback } from '@ddp/autograd';
import type { Parameter } from '@ddp/nn';
import { tf } from '@ddp/tensor';
import type { FlatShard } from './flat-shard.js';

/**
 * Reduce-scatters a unit's backward issued and not yet complete, in this process. Backward goes
 * on while they run (the engine awaits each node's backward, so awaiting one there would keep
 * every earlier unit's backward waiting for it, as it did); beyond this many the next unit
 * waits for the oldest, which bounds the host buffers they hold (FSDP2 bounds its reduce-scatter
 * stream's memory the same way).
 */
const MAX_IN_FLIGHT = 2;
const inFlight: Promise<void>[] = [];

/**
 * Starts averaging `flat`'s full gradients into its shards (they are copied out and dropped
 * before this returns); the shards' gradients are added once backward's graph is done, in a
 * queued callback, which rethrows the collective's failure. Call during backward.
 */
export async function reduceInBackground(flat: FlatShard): Promise<void> {
  while (inFlight.length >= MAX_IN_FLIGHT) await inFlight[0];
  const grad = flat.reduceScatterGrads();
  const settled = grad.then(
    () => {},
    () => {},
  );
  inFlight.push(settled);
  void settled.then(() => inFlight.splice(inFlight.indexOf(settled), 1));
  queueCallback(async () => accumulate(flat.shards, await grad));
}

/** Adds reduce-scattered gradients to their shards' (null: no rank gave that parameter one). */
export function accumulate(shards: readonly Parameter[], grads: (tf.Tensor | null)[]): void {
  shards.forEach((shard, i) => {
    const grad = grads[i];
    if (grad === null) return;
    if (shard.grad === null) shard.grad = grad;
    else {
      shard.grad = tf.add(shard.grad, grad);
      grad.dispose();
    }
  });
}
