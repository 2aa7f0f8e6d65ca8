import { tf } from '@ddp/tensor';
import { PackedSaved, packSaved } from './saved-tensor-hooks.js';
import type { Tensor } from './tensor.js';

/** Removes a registered hook. */
export interface RemovableHandle {
  remove(): void;
}

export function addHook<H>(list: H[], hook: H): RemovableHandle {
  list.push(hook);
  return {
    remove: () => {
      const i = list.indexOf(hook);
      if (i >= 0) list.splice(i, 1);
    },
  };
}

/**
 * A gradient hook on a tensor: may return a replacement gradient of the same shape and dtype (the
 * engine disposes the old one). The argument is lent for the call: the engine disposes it once
 * the hooks ran, so reading it later throws tfjs's "Tensor is disposed". Keep a copy with
 * `grad.clone()` (tf.keep does not help: the engine disposes it explicitly), or call
 * `retainGrad()` on the tensor to find its gradient in `.grad` after backward.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a hook that returns nothing keeps the gradient
export type TensorHook = (grad: tf.Tensor) => tf.Tensor | void;
/** Fires on a leaf after its .grad was updated. A returned promise is awaited before backward resolves. */
export type PostAccumulateGradHook = (tensor: Tensor) => void | Promise<void>;

/** Where a gradient goes: the gradient of output `outputIndex` of `node`. */
export interface Edge {
  readonly node: Node;
  readonly outputIndex: number;
}

let nextSequenceNr = 0;

/** A vertex of the backward graph: a Function application or a leaf's gradient accumulator. */
export abstract class Node {
  /** Creation order; the engine runs later-created nodes first among those ready. */
  readonly sequenceNr: number;
  /** One edge per forward input; null where the input needs no gradient. */
  readonly next: (Edge | null)[];
  freed = false;
  /**
   * Taken by a backward that frees it (no retainGraph) and has not finished: a second backward over it
   * is refused at once (two un-awaited backwards both ran every node, the gradients doubled silently).
   */
  claimed = false;

  constructor(next: (Edge | null)[], sequenceNr = nextSequenceNr++) {
    this.next = next;
    this.sequenceNr = sequenceNr;
  }

  abstract get name(): string;
  abstract get numOutputs(): number;

  /** Live output Tensors plus live consumer nodes that point at this node. */
  private refs = 0;

  /** Drops what backward would need; a later backward through this node raises GraphFreedError. */
  releaseSaved(): void {
    this.freed = true;
  }

  addRef(): void {
    this.refs++;
  }

  /**
   * Drops one reference. When the last output Tensor is disposed and no live node consumes this
   * one, nobody can backward through it: free it, and drop its own references to its inputs.
   */
  releaseRef(): void {
    if (--this.refs > 0 || this.freed) return;
    this.releaseSaved();
    for (const edge of this.next) edge?.node.releaseRef();
  }
}

/** Forward-time state of one Function application, handed to its backward. */
export class Context {
  private saved: (tf.Tensor | PackedSaved)[] | null = [];
  /** needsInputGrad[i]: whether input i (a Tensor requiring grad) wants a gradient. */
  readonly needsInputGrad: readonly boolean[];
  /** Whether a graph is recorded at all; saveForBackward is a no-op otherwise. */
  readonly recording: boolean;
  /** Set for the backward running it: whether that backward keeps the graph (checkpoint's recomputation does too). */
  retainsGraph = false;

  constructor(needsInputGrad: boolean[]) {
    this.needsInputGrad = needsInputGrad;
    this.recording = needsInputGrad.some(Boolean);
  }

  /**
   * Keeps tensors for backward. The context owns clones of them (or the stand-ins the active
   * saved-tensor hooks pack them into); freed after backward.
   */
  saveForBackward(...tensors: tf.Tensor[]): void {
    if (!this.recording || this.saved === null) return;
    for (const t of tensors) this.saved.push(packSaved(t) ?? tf.keep(t.clone()));
  }

  /**
   * Keeps tensors that forward created and does not return (statistics, masks): nothing else
   * holds them, so the context takes them as they are instead of cloning. Never pass an input
   * or an output here: its owner would dispose it under backward.
   */
  keepForBackward(...tensors: tf.Tensor[]): void {
    if (!this.recording || this.saved === null) return;
    for (const t of tensors) this.saved.push(tf.keep(t));
  }

  get savedTensors(): tf.Tensor[] {
    if (this.saved === null) throw new Error('saved tensors were freed');
    // stand-ins (saved-tensor hooks) are unpacked on the first read; the context owns the result
    this.saved = this.saved.map((s) => (s instanceof PackedSaved ? tf.keep(s.unpack()) : s));
    return this.saved as tf.Tensor[];
  }

  get isFreed(): boolean {
    return this.saved === null;
  }

  /** Whether `t` is one of the saved tensors (which release() disposes). */
  holds(t: tf.Tensor): boolean {
    return this.saved?.includes(t) ?? false;
  }

  /** Disposes the saved tensors (after backward without retainGraph). */
  release(): void {
    if (this.saved === null) return;
    for (const t of this.saved) if (!(t instanceof PackedSaved)) t.dispose();
    this.saved = null;
  }
}

/** The sink of a leaf tensor's gradient: runs its hooks and accumulates into .grad. */
export class AccumulateGrad extends Node {
  constructor(readonly variable: Tensor) {
    super([], Number.MAX_SAFE_INTEGER);
  }
  get name(): string {
    return 'AccumulateGrad';
  }
  get numOutputs(): number {
    return 1;
  }
  // a leaf's accumulator lives as long as the leaf
  override addRef(): void {}
  override releaseRef(): void {}
}
