import type { NumArray, ReduceOp } from '../dtypes.js';
import type { OpContext } from '../execution/op-context.js';
import { finishAverage } from './reduce.js';

/**
 * The middle of the hierarchical all-reduce of a group spanning hosts (host-layout.ts):
 * shm.ts reduces each piece inside every host, each local rank owning one chunk (as in the
 * one-host case); here every owner all-reduces its chunk with the owners of the same chunk on
 * the other hosts, over sockets; then shm.ts shares the result inside each host. So every
 * local rank carries 1/L of the traffic between hosts on a connection of its own (NCCL's
 * layout: no leader that all bytes and reductions funnel through), and the link carries
 * each host's data once each way: 2(H−1)/H of the data per host on the ring, against
 * 2(N−1)/N per boundary-crossing rank of a flat ring (1.5× as much for 2 hosts × 2 ranks).
 * Each element is reduced across hosts by one ring, so all ranks agree bit for bit.
 */
export interface AcrossHosts {
  /** This op among the ranks holding this rank's chunk on every host. */
  ctx: OpContext;
  /** Ranks in the whole group (AVG's divisor). */
  total: number;
  /** The flat all-reduce to run among them (direct or ring, by size). */
  allReduce: (ctx: OpContext, data: NumArray, op: ReduceOp) => Promise<void>;
}

/**
 * All-reduces `chunk` (this host's reduction; AVG: its sum) across hosts. AVG sums across
 * hosts, then divides by the group size; where that sum overflowed to ±Infinity (every rank
 * of `ctx` sees the same sums, so all decide alike), each host's Σ x/N over `inputs` (this
 * host's inputs of the chunk) is summed across hosts instead, unless an input was not finite
 * — the neighbours of the flat paths' fallback (reduce.ts).
 */
export async function acrossHosts(
  across: AcrossHosts,
  chunk: NumArray,
  op: ReduceOp,
  inputs: NumArray[],
): Promise<void> {
  await across.allReduce(across.ctx, chunk, op === 'avg' ? 'sum' : op);
  if (op !== 'avg') return;
  finishAverage(chunk, across.total);
  if (
    chunk instanceof Int32Array ||
    !chunk.some((v) => v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY)
  )
    return;
  const round = chunk instanceof Float32Array ? Math.fround : (x: number) => x;
  const divided = new (chunk.constructor as new (n: number) => NumArray)(chunk.length);
  for (let i = 0; i < chunk.length; i++) {
    let acc = 0;
    for (const input of inputs) acc = round(acc + round(input[i] / across.total));
    divided[i] = acc;
  }
  await across.allReduce(across.ctx, divided, 'sum');
  for (let i = 0; i < chunk.length; i++) {
    const v = chunk[i];
    if ((v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY) && Number.isFinite(divided[i]))
      chunk[i] = divided[i];
  }
}
