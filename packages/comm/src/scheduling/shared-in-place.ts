import type { Work } from '../api/work.js';
import type { CommArray, Dtype, ReduceOp } from '../dtypes.js';
import { int32Average } from './int32-average.js';
import type { OpDispatcher } from './op-dispatcher.js';
import { bytes } from './staging.js';

/**
 * The gather-shaped collectives' dispatch: staged like any op, or on the caller's shared memory
 * itself, no staging copies (as allReduce on a sharedArray): what FSDP needs to gather
 * parameters into, and reduce gradients in, the wasm heap its tensors live on (aliased as a
 * SharedArrayBuffer).
 */

/**
 * allGatherInto into shared `output`: this rank's input is placed in its slot (unless it is that slot), then gathered
 * around it.
 */
export function allGatherIntoShared(
  ops: OpDispatcher,
  output: CommArray,
  input: CommArray,
  d: Dtype,
  rank: number,
): Work {
  const slot = bytes(output).subarray(rank * input.byteLength, (rank + 1) * input.byteLength);
  const place = () => {
    if (input.buffer !== output.buffer || input.byteOffset !== slot.byteOffset) slot.set(bytes(input));
  };
  return ops.onShared('allGatherInto', output, d, { count: input.length }, { reads: [input], writes: [output] }, place);
}

/**
 * reduceScatter reducing shared `input` where it is; this rank's chunk copied to `output` unless `output` is that
 * chunk.
 */
export function reduceScatterInPlace(
  ops: OpDispatcher,
  output: CommArray,
  input: CommArray,
  d: Dtype,
  reduceOp: ReduceOp,
  rank: number,
): Work {
  const chunk = bytes(input).subarray(rank * output.byteLength, (rank + 1) * output.byteLength);
  const isChunk = output.buffer === input.buffer && output.byteOffset === chunk.byteOffset;
  const copyOut = () => {
    if (!isChunk) bytes(output).set(chunk);
  };
  const n = input.length;
  const io = { reads: [input], writes: [input, output] };
  return ops.onShared('reduceScatter', input, d, { reduceOp, count: n, length: n }, io, undefined, copyOut);
}

/** Reduce-scatter: rank `rank` gets chunk `rank` of `input` reduced over the group in `output`. */
export function reduceScatter(
  ops: OpDispatcher,
  output: CommArray,
  input: CommArray,
  d: Dtype,
  reduceOp: ReduceOp,
  rank: number,
  overwriteInput = false,
): Work {
  if (d === 'int32' && reduceOp === 'avg')
    return int32Average(ops, 'reduceScatter', input as Int32Array, output as Int32Array, rank * output.length, {});
  const n = input.length;
  if (overwriteInput && input.buffer instanceof SharedArrayBuffer)
    return reduceScatterInPlace(ops, output, input, d, reduceOp, rank);
  return ops.submit(
    { op: 'reduceScatter', dtype: d, reduceOp, root: 0, count: n, length: n },
    input.byteLength,
    (sab) => new Uint8Array(sab, 0, input.byteLength).set(bytes(input)),
    (sab) => bytes(output).set(new Uint8Array(sab, rank * output.byteLength, output.byteLength)),
    { reads: [input], writes: [output] },
  );
}
