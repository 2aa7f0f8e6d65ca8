// Messages between DataParallel (main thread) and its replica worker threads.
import type { AutocastDtype } from '@ddp/autograd';

export interface ReplicaInit {
  /** A module file exporting a function that builds the model (the same on every thread). */
  factoryUrl: string;
  exportName: string;
  replica: number;
  /** Kernel threads of this replica: the process's share (threads ÷ replicas), as ddp-run gives each rank. */
  threads: number;
  /** The main replica's parameters, flat: written by the main thread before every forward. */
  params: Float32Array;
  /** This replica's gradients, flat: written by the replica after its backward. */
  grads: Float32Array;
}

/** A buffer's values (running statistics are float32, counters int32), in registration order. */
export interface BufferValues {
  data: Float32Array | Int32Array;
  shape: number[];
}

export type ToReplica =
  | {
      type: 'forward';
      /** Names this forward's graph, which its backward names too (several may be pending, as in torch). */
      id: number;
      /** Changes whenever the main replica's parameters do: a replica reloads them then. */
      version: number;
      /** Whether the main thread records a graph (grad mode): without, the replica keeps none. */
      record: boolean;
      input: Float32Array;
      shape: number[];
      /** Each module's training flag, in `modules()` order: eval on the main replica is eval everywhere. */
      training: boolean[];
      /** The main replica's buffers, copied in before the forward (torch broadcasts them too). */
      buffers: BufferValues[];
      /** Whether the input needs a gradient (the main graph reaches a parameter through it). */
      inputGrad: boolean;
      /** The main thread's autocast dtype (torch's parallel_apply re-enters autocast on each replica). */
      autocast: AutocastDtype | null;
      /** This forward's seed for the replica's default generators (dropout masks), drawn on the main thread. */
      seed: number;
    }
  | { type: 'backward'; id: number; grad: Float32Array; shape: number[] }
  /** The main graph of that forward was freed unbackwarded (its output disposed): drop the replica's. No answer. */
  | { type: 'release'; id: number };

export type FromReplica =
  | { type: 'ready'; numel: number }
  /** The output, and the buffers after the forward (replica 0's become the main replica's, as in torch). */
  | { type: 'output'; data: Float32Array; shape: number[]; buffers: BufferValues[] }
  /** After backward (the parameter gradients are in the shared buffer): the input's gradient, when asked. */
  | { type: 'grads'; inputGrad: Float32Array | null }
  | { type: 'error'; name: string; message: string };
