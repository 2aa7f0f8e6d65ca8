// Messages between DataParallel (main thread) and its replica worker threads.

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

export type ToReplica =
  | { type: 'forward'; input: Float32Array; shape: number[] }
  | { type: 'backward'; grad: Float32Array; shape: number[] };

export type FromReplica =
  | { type: 'ready'; numel: number }
  | { type: 'output'; data: Float32Array; shape: number[] }
  | { type: 'grads' }
  | { type: 'error'; name: string; message: string };
