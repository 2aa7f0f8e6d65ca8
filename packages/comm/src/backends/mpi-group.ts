import type { Kind } from '@ddp/mpi';
import {
  COLLECTIVE_OPTIONS,
  checkAllToAll,
  checkGatherInto,
  checkNoArguments,
  checkOptionKeys,
  checkPeer,
  checkReduceScatter,
  checkRoot,
  checkScatterInputs,
} from '../api/arg-checks.js';
import { isDestroyed } from '../api/destroyed-groups.js';
import type { P2POp, ProcessGroup } from '../api/group.js';
import { makeWork, type Work } from '../api/work.js';
import type { CommArray, HalfDtype, OpName, ReduceOp } from '../dtypes.js';
import { dtypeOf, movedDtype, reduceOpOf } from '../dtypes.js';
import { CommError, laterCallError, NotInitializedError } from '../errors.js';
import { bytes } from '../scheduling/staging.js';
import {
  concat,
  descriptor,
  K,
  moveCall,
  type Prepared,
  p2pCall,
  reductionCall,
  SAME_CALL,
  SAME_COUNT,
  splitGathered,
} from './mpi-calls.js';
import { type MpiComm, type MpiRuntime, SPLIT } from './mpi-runtime.js';

/**
 * A process group on Open MPI (PyTorch's ProcessGroupMPI): each call runs on @ddp/mpi's MPI
 * thread, after the members agreed it is the same call (descriptors, mpi.cc). Reductions of
 * float16/bfloat16 run in float32 (widened here, narrowed after); AVG sums then divides, as
 * the other backends do (near the type's limit too).
 */
export class MpiProcessGroup implements ProcessGroup {
  constructor(
    private readonly rt: MpiRuntime,
    private readonly comm: MpiComm,
    readonly timeoutMs: number,
    /** Whether destroyProcessGroup ran (then every call raises NotInitializedError). */
    private readonly destroyed: () => boolean,
  ) {}

  get rank(): number {
    return this.comm.rank;
  }
  get size(): number {
    return this.comm.ranks.length;
  }
  get ranks(): readonly number[] {
    return this.comm.ranks;
  }

  private get me(): number {
    return this.rt.globalRank;
  }

  /** The same members with collectives of their own: MPI_Comm_split of this communicator (collective over it). */
  async duplicate(timeoutMs: number): Promise<MpiProcessGroup> {
    const call = { kind: SPLIT, rule: 0, type: 0, op: this.rank, root: 0, desc: null, counts: null, a: null, b: null };
    const [, , , , handle] = await this.rt.order.issue(this.comm.handle, [], () =>
      this.rt.run(this.comm, 'duplicateGroup', call, timeoutMs),
    );
    if (handle < 0) throw new CommError(`rank ${this.me}: duplicateGroup: MPI gave no communicator`);
    const comm: MpiComm = { handle, ranks: this.comm.ranks, rank: this.comm.rank, failed: null };
    return new MpiProcessGroup(this.rt, comm, timeoutMs, this.destroyed);
  }

  /**
   * Validates and starts a call. A call that fails here (bad arguments) still takes part in
   * the agreement, flagged as failed, so every member refuses it instead of waiting for it.
   */
  private collective<T>(call: OpName, opts: object | undefined, args: unknown[], prepare: () => Prepared<T>): Work<T> {
    if (this.destroyed() || isDestroyed(this))
      throw new NotInitializedError(`rank ${this.me}: ${call} on a process group after destroyProcessGroup`, {
        rank: this.me,
        op: call,
      });
    // a failure is announced in this call's place of the issue order (behind a held call, as the others see it)
    const staged = (announce: (err: CommError) => void) => {
      try {
        return this.prepared(call, opts, prepare);
      } catch (err) {
        announce(err as CommError);
        throw err;
      }
    };
    let p = staged((err) => void this.rt.order.issue(this.comm.handle, [], async () => this.announce(call, err)));
    // the call's arrays (prepare has checked them), for the issue order
    const arrays = args.flat().filter((a): a is ArrayBufferView => ArrayBuffer.isView(a));
    const run = this.rt.order.issue(this.comm.handle, arrays, async (restage) => {
      if (restage) p = staged((err) => this.announce(call, err)); // at its dispatch: its place
      const r = await this.rt.run(this.comm, call, p.call, this.timeoutMs);
      return p.finish(r[2], r[1]);
    });
    return makeWork(run);
  }

  /** `prepare()`'s call; when it fails, the typed error, this communicator's failure from now on. */
  private prepared<T>(call: OpName, opts: object | undefined, prepare: () => Prepared<T>): Prepared<T> {
    try {
      const first = this.rt.stuck ?? this.comm.failed;
      if (first) throw laterCallError(first, this.me, call);
      checkOptionKeys(call, opts, COLLECTIVE_OPTIONS[call], this.me);
      return prepare();
    } catch (e) {
      const err =
        e instanceof CommError
          ? e
          : new CommError(`rank ${this.me}: ${call} failed: ${e}`, { rank: this.me, op: call, cause: e });
      err.rank ??= this.me;
      err.op ??= call;
      this.rt.fail(this.comm, err);
      throw err;
    }
  }

  /** The members still waiting for a call this rank failed refuse it too (and every later one this rank refuses). */
  private announce(call: OpName, err: CommError): void {
    if (this.size > 1)
      this.rt.announceFailure(this.comm, descriptor(this.size, call, 'float32', undefined, 0, 0), err, this.timeoutMs);
  }

  allReduce(buf: CommArray, opts: { op?: ReduceOp; dtype?: HalfDtype } = {}): Work {
    return this.collective('allReduce', opts, [buf], () =>
      reductionCall(
        this,
        'allReduce',
        buf,
        dtypeOf(buf, opts.dtype),
        reduceOpOf(opts.op, 'allReduce'),
        0,
        buf.length,
        buf,
      ),
    );
  }

  reduce(buf: CommArray, opts: { dst: number; op?: ReduceOp; dtype?: HalfDtype }): Work {
    return this.collective('reduce', opts, [buf], () => {
      checkRoot(opts.dst, this.size, this.me, 'reduce dst');
      return reductionCall(
        this,
        'reduce',
        buf,
        dtypeOf(buf, opts.dtype),
        reduceOpOf(opts.op, 'reduce'),
        opts.dst,
        buf.length,
        buf,
      );
    });
  }

  reduceScatter(output: CommArray, input: CommArray, opts: { op?: ReduceOp; dtype?: HalfDtype } = {}): Work {
    return this.collective('reduceScatter', opts, [output, input], () => {
      checkReduceScatter(output, input, this.size);
      return reductionCall(
        this,
        'reduceScatter',
        input,
        dtypeOf(input, opts.dtype),
        reduceOpOf(opts.op, 'reduceScatter'),
        0,
        output.length,
        output,
      );
    });
  }

  broadcast(buf: CommArray, opts: { src: number; dtype?: HalfDtype }): Work {
    return this.collective('broadcast', opts, [buf], () => {
      checkRoot(opts.src, this.size, this.me, 'broadcast src');
      const d = movedDtype(buf, opts.dtype, 'broadcast');
      return { call: moveCall(this, 'broadcast', d, SAME_COUNT, opts.src, buf.length, buf, null), finish: () => {} };
    });
  }

  allGather(input: CommArray, opts: { dtype?: HalfDtype } = {}): Work<CommArray[]> {
    return this.collective('allGather', opts, [input], () => {
      const d = movedDtype(input, opts.dtype, 'allGather');
      return {
        call: moveCall(this, 'allGather', d, SAME_CALL, 0, input.length, input, null),
        finish: (out, all) => splitGathered(this.size, d, out, all),
      };
    });
  }

  allGatherInto(output: CommArray, input: CommArray, opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allGatherInto', opts, [output, input], () => {
      checkGatherInto(output, input, this.size);
      const d = movedDtype(input, opts.dtype, 'allGatherInto');
      const call = {
        ...moveCall(this, 'allGatherInto', d, SAME_COUNT, 0, input.length, input, null),
        kind: K.allGather as Kind,
      };
      return { call, finish: (out) => bytes(output).set(new Uint8Array(out)) };
    });
  }

  gather(input: CommArray, opts: { dst: number; dtype?: HalfDtype }): Work<CommArray[] | null> {
    return this.collective('gather', opts, [input], () => {
      checkRoot(opts.dst, this.size, this.me, 'gather dst');
      const d = movedDtype(input, opts.dtype, 'gather');
      const call = moveCall(this, 'gather', d, SAME_CALL, opts.dst, input.length, input, null);
      return { call, finish: (out, all) => (this.rank === opts.dst ? splitGathered(this.size, d, out, all) : null) };
    });
  }

  scatter(output: CommArray, opts: { src: number; inputs?: CommArray[]; dtype?: HalfDtype }): Work {
    return this.collective('scatter', opts, [output, opts?.inputs], () => {
      checkRoot(opts.src, this.size, this.me, 'scatter src');
      const d = movedDtype(output, opts.dtype, 'scatter');
      if (this.rank !== opts.src)
        return {
          call: moveCall(this, 'scatter', d, SAME_CALL, opts.src, output.length, null, output),
          finish: () => {},
        };
      const inputs = opts.inputs;
      checkScatterInputs(output, inputs, this.size, this.rank, this.me);
      const sizes = inputs.map((a) => a.length);
      return {
        call: moveCall(this, 'scatter', d, SAME_CALL, opts.src, output.length, concat(output, inputs), output, sizes),
        finish: () => {},
      };
    });
  }

  allToAll(outputs: CommArray[], inputs: CommArray[], opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allToAll', opts, [outputs, inputs], () => {
      checkAllToAll(outputs, inputs, this.size);
      const like = inputs[0] as CommArray;
      const d = movedDtype(like, opts.dtype, 'allToAll');
      const received = concat(like, outputs);
      const lengths = [...inputs, ...outputs].map((a) => a.length);
      const call = moveCall(this, 'allToAll', d, SAME_CALL, 0, 0, concat(like, inputs), received, lengths);
      return {
        call,
        finish: () => {
          let off = 0;
          for (const o of outputs) {
            o.set(received.subarray(off, off + o.length) as never);
            off += o.length;
          }
        },
      };
    });
  }

  barrier(...args: unknown[]): Work {
    return this.collective('barrier', undefined, [], () => {
      checkNoArguments('barrier', args, this.me);
      return { call: moveCall(this, 'barrier', 'float32', SAME_CALL, 0, 0, null, null), finish: () => {} };
    });
  }

  send(buf: CommArray, dst: number, tag = 0, opts: { dtype?: HalfDtype } = {}): Work {
    return this.batchIsendIrecv([{ op: 'isend', buf, peer: dst, tag, dtype: opts.dtype }]);
  }

  recv(buf: CommArray, src: number, tag = 0, opts: { dtype?: HalfDtype } = {}): Work {
    return this.batchIsendIrecv([{ op: 'irecv', buf, peer: src, tag, dtype: opts.dtype }]);
  }

  /**
   * Every send and receive at once (MPI_Isend/Irecv, then MPI_Waitall), staged in one buffer.
   * No agreement: a receive of a different size than was sent is an error on the receiver.
   */
  batchIsendIrecv(ops: P2POp[]): Work {
    if (this.destroyed() || isDestroyed(this))
      throw new NotInitializedError(`rank ${this.me}: batchIsendIrecv after destroyProcessGroup`, {
        rank: this.me,
        op: 'batchIsendIrecv',
      });
    for (const o of ops) {
      checkPeer(o.op, o.peer, this.size, this.rank, this.me, o.tag ?? 0);
      movedDtype(o.buf, o.dtype, o.op);
    }
    let staged = p2pCall(ops);
    const run = this.rt.order.issue(
      this.comm.handle,
      ops.map((o) => o.buf),
      async (restage) => {
        if (restage) staged = p2pCall(ops);
        await this.rt.run(this.comm, 'batchIsendIrecv', staged.call, this.timeoutMs);
        staged.received();
      },
    );
    return makeWork(run);
  }
}
