import type { Tensor } from '@ddp/autograd';
import type { Parameter } from './parameter.js';

/** A module's parameter whose gradient lands in another Parameter, the one optimizers step (FSDP's shard). */
const shards = new WeakMap<Tensor, Parameter>();

/**
 * Marks `shard` as what an optimizer steps for the module parameter `full` (fully sharded data
 * parallel): `Module.zeroGrad` clears it too, as torch's `model.zero_grad()` clears FSDP2's
 * sharded parameters (it cleared the full ones only, and the shards' gradients piled up).
 */
export function markShardOf(full: Tensor, shard: Parameter): void {
  shards.set(full, shard);
}

/** The Parameter holding `full`'s gradient in its place, if it is sharded. */
export function shardOf(full: Tensor): Parameter | undefined {
  return shards.get(full);
}
