import type { tf } from '@ddp/tensor';
import type { Tensor } from './tensor.js';

/**
 * What checkpoint needs of Tensor's `data`: while it records a segment, which Tensors the segment
 * read (those from outside are what it captured); while it recomputes one, the values the captured
 * tensors had at its forward, read for those disposed since (a forward inside `tidy`: torch's
 * recomputation reads them, ddp's raised TensorDisposedError; probe CM). A live one reads live, as
 * torch's does (a BatchNorm's running statistics, updated again by the recomputation).
 */
let reads: Set<Tensor> | null = null;
let values: ReadonlyMap<Tensor, tf.Tensor> | null = null;
/** Either is set: Tensor's getters look here (one test per read otherwise). */
export let tracingReads = false;

/** The value a read of t's data gives while a recomputation runs, if it captured t; notes the read. */
export function traceRead(t: Tensor): tf.Tensor | undefined {
  reads?.add(t);
  return values?.get(t);
}

function withState<T>(r: Set<Tensor> | null, v: ReadonlyMap<Tensor, tf.Tensor> | null, fn: () => T): T {
  const before = [reads, values] as const;
  [reads, values, tracingReads] = [r, v, r !== null || v !== null];
  try {
    return fn();
  } finally {
    [reads, values] = before;
    tracingReads = reads !== null || values !== null;
  }
}

/** Runs fn noting into `into` every Tensor whose data it reads. */
export const recordingReads = <T>(into: Set<Tensor>, fn: () => T): T => withState(into, values, fn);

/** Runs fn with the captured tensors reading as the values given (a segment's recomputation). */
export const withCapturedValues = <T>(captured: ReadonlyMap<Tensor, tf.Tensor>, fn: () => T): T =>
  withState(reads, captured, fn);
