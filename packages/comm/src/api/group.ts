import type { CommArray, HalfDtype, ReduceOp } from '../dtypes.js';
import type { Work } from './work.js';

// What a process group offers: torch.distributed's collectives on typed arrays. The one
// implementation, WorkerProcessGroup (process-group.ts), routes each call to a thread.

/** One transfer of batchIsendIrecv (PyTorch's P2POp); peer is a group rank. */
export interface P2POp {
  op: 'isend' | 'irecv';
  buf: CommArray;
  peer: number;
  tag?: number;
  dtype?: HalfDtype;
}

export interface ReduceScatterOptions {
  op?: ReduceOp;
  dtype?: HalfDtype;
  /**
   * The input may serve as the workspace (its values are undefined afterwards): when it is
   * shared memory, it is reduced where it is, with no staging copy (one copy out for `output`,
   * none when `output` is this rank's chunk of it).
   */
  overwriteInput?: boolean;
}

export interface ProcessGroup {
  /** Rank within this group. */
  readonly rank: number;
  /** Number of members. */
  readonly size: number;
  /** Global ranks of the members, in group-rank order. */
  readonly ranks: readonly number[];
  allReduce(buf: CommArray, opts?: { op?: ReduceOp; dtype?: HalfDtype }): Work;
  broadcast(buf: CommArray, opts: { src: number; dtype?: HalfDtype }): Work;
  allGather(input: CommArray, opts?: { dtype?: HalfDtype }): Work<CommArray[]>;
  allGatherInto(output: CommArray, input: CommArray, opts?: { dtype?: HalfDtype }): Work;
  reduceScatter(output: CommArray, input: CommArray, opts?: ReduceScatterOptions): Work;
  reduce(buf: CommArray, opts: { dst: number; op?: ReduceOp; dtype?: HalfDtype }): Work;
  gather(input: CommArray, opts: { dst: number; dtype?: HalfDtype }): Work<CommArray[] | null>;
  scatter(output: CommArray, opts: { src: number; inputs?: CommArray[]; dtype?: HalfDtype }): Work;
  allToAll(outputs: CommArray[], inputs: CommArray[], opts?: { dtype?: HalfDtype }): Work;
  barrier(): Work;
  send(buf: CommArray, dst: number, tag?: number, opts?: { dtype?: HalfDtype }): Work;
  recv(buf: CommArray, src: number, tag?: number, opts?: { dtype?: HalfDtype }): Work;
  batchIsendIrecv(ops: P2POp[]): Work;
}
