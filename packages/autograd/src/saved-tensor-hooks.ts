import { AsyncLocalStorage } from 'node:async_hooks';
import type { tf } from '@ddp/tensor';

/**
 * torch.autograd.graph.saved_tensors_hooks: how the Functions applied inside
 * `withSavedTensorHooks` keep the tensors they save for backward.
 */
export interface SavedTensorHooks<P = unknown> {
  /** Called with each tensor being saved: a stand-in to keep instead, or undefined to keep the tensor as usual. */
  pack(tensor: tf.Tensor): P | undefined;
  /**
   * Called when backward first reads a packed tensor: the tensor to use, a new handle the graph
   * owns (disposed with the graph's other saved tensors).
   */
  unpack(packed: P): tf.Tensor;
}

/** A saved tensor its hooks replaced by a stand-in; unpacked when backward reads it. */
export class PackedSaved {
  constructor(
    private readonly hooks: SavedTensorHooks,
    private readonly packed: unknown,
  ) {}

  unpack(): tf.Tensor {
    return this.hooks.unpack(this.packed);
  }
}

// async-context local: a Function applied with applyAsync, or another simulated rank, sees its own hooks
const active = new AsyncLocalStorage<SavedTensorHooks>();

/**
 * Runs `fn` with `hooks` packing every tensor a Function saves for backward (the innermost hooks
 * apply). FSDP keeps its gathered parameters this way: it packs a parameter as a reference and
 * re-gathers it before the backward that unpacks it, so the graph does not hold its memory.
 */
export function withSavedTensorHooks<T, P>(hooks: SavedTensorHooks<P>, fn: () => T): T {
  return active.run(hooks as SavedTensorHooks, fn);
}

/** The stand-in the active hooks keep for `t`, or null when none is active or they keep `t` itself. */
export function packSaved(t: tf.Tensor): PackedSaved | null {
  const hooks = active.getStore();
  if (hooks === undefined) return null;
  const packed = hooks.pack(t);
  return packed === undefined ? null : new PackedSaved(hooks, packed);
}
