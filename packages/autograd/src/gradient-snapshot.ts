import type { tf } from '@ddp/tensor';
import type { Tensor } from './tensor.js';

/**
 * The gradients of `params` as they are now, to give back later (`restore`) or let go (`release`):
 * join's shadowed iterations and a failed iteration under join write gradients that must not stay.
 * Clones share the storage: backward's accumulation and an optimizer's write-back make new
 * tensors, so the clones keep the values of now without a copy.
 */
export class GradientSnapshot {
  private grads: (tf.Tensor | null)[];

  constructor(private readonly params: readonly Tensor[]) {
    this.grads = params.map((p) => p.grad?.clone() ?? null);
  }

  /** Each parameter's gradient back to the snapshot's (once). */
  restore(): void {
    for (const [i, grad] of this.grads.entries()) this.params[i].grad = grad;
    this.grads = [];
  }

  /** Not needed: its clones freed (after restore, nothing). */
  release(): void {
    for (const grad of this.grads) grad?.dispose();
    this.grads = [];
  }
}
