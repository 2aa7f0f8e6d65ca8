import type { Kind } from '@ddp/mpi';
import {
  bytesPerElement,
  type CommArray,
  DTYPE_CODE,
  type Dtype,
  dtypeOf,
  type HalfDtype,
  OP_CODE,
  type OpName,
  REDUCE_CODE,
  type ReduceOp,
  reduceOpOf,
  viewAs,
} from '../dtypes.js';
import { CommError, InvalidArgumentError, laterCallError, NotInitializedError } from '../errors.js';
import type { P2POp, ProcessGroup } from '../group.js';
import { narrowHalf, widenHalf } from '../half.js';
import { bytes } from '../staging.js';
import { makeWork, type Work } from '../work.js';
import type { MpiComm, MpiRuntime, NativeCall } from './mpi-runtime.js';

// @ddp/mpi's Kind and Rule values (a value import would make the optional addon a hard dependency).
const K = {
  allReduce: 3,
  broadcast: 4,
  reduce: 5,
  allGather: 6,
  gather: 7,
  scatter: 8,
  reduceScatter: 9,
  allToAll: 10,
  barrier: 11,
  p2p: 12,
} as const;
const SAME_CALL = 1;
const SAME_COUNT = 2;
const FIXED = 6;

/** MPI's element type for moving a dtype (16-bit words for float16/bfloat16). */
const MOVE_TYPE: Record<Dtype, number> = { float32: 1, float64: 2, int32: 3, float16: 4, bfloat16: 4 };
const isHalf = (d: Dtype): d is HalfDtype => d === 'float16' || d === 'bfloat16';

/** A call ready for the MPI thread, and what to do with its result. */
interface Prepared<T> {
  call: NativeCall;
  finish: (out: ArrayBuffer, all: Int32Array | undefined) => T;
}

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

  /**
   * Validates and starts a call. A call that fails here (bad arguments) still takes part in
   * the agreement, flagged as failed, so every member refuses it instead of waiting for it.
   */
  private collective<T>(call: OpName, prepare: () => Prepared<T>): Work<T> {
    if (this.destroyed())
      throw new NotInitializedError(`rank ${this.me}: ${call} on a process group after destroyProcessGroup`, {
        rank: this.me,
        op: call,
      });
    let p: Prepared<T>;
    try {
      const first = this.rt.stuck ?? this.comm.failed;
      if (first) throw laterCallError(first, this.me, call);
      p = prepare();
    } catch (e) {
      const err =
        e instanceof CommError
          ? e
          : new CommError(`rank ${this.me}: ${call} failed: ${e}`, { rank: this.me, op: call, cause: e });
      err.rank ??= this.me;
      err.op ??= call;
      // the members still waiting for this call refuse it too (and every later one this rank refuses)
      if (this.size > 1)
        this.rt.announceFailure(this.comm, this.desc(call, 'float32', undefined, 0, 0), err, this.timeoutMs);
      this.rt.fail(this.comm, err);
      throw err;
    }
    const run = this.rt.run(this.comm, call, p.call, this.timeoutMs);
    return makeWork(run.then((r) => p.finish(r[2], r[1])));
  }

  /** This rank's descriptor of a call: op, dtype, reduce op, root, count, failed flag, counts sent to and received from each member. */
  private desc(
    op: OpName,
    d: Dtype,
    reduce: ReduceOp | undefined,
    root: number,
    count: number,
    perMember?: number[],
  ): Int32Array {
    const a = new Int32Array(FIXED + 2 * this.size);
    a.set([OP_CODE[op], DTYPE_CODE[d], reduce ? REDUCE_CODE[reduce] : 0, root, count, 0]);
    if (perMember) a.set(perMember, FIXED);
    return a;
  }

  private checkRoot(root: number, what: string): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size) {
      throw new InvalidArgumentError(`rank ${this.me}: ${what} ${root} is not a rank of this group of ${this.size}`, {
        op: what,
      });
    }
  }

  /**
   * allReduce, reduce and reduceScatter: `input` reduced in MPI (half dtypes widened to
   * float32 first, narrowed after); AVG divides in @ddp/mpi.
   */
  private reduction(
    call: 'allReduce' | 'reduce' | 'reduceScatter',
    input: CommArray,
    d: Dtype,
    op: ReduceOp,
    root: number,
    outCount: number,
    output: CommArray,
  ): Prepared<void> {
    const half = isHalf(d);
    const work = half ? widenHalf(input as Uint16Array, d) : input;
    const out = call !== 'reduceScatter' ? work : half ? new Float32Array(outCount) : output;
    const count = call === 'reduceScatter' ? outCount : input.length;
    const receives = call !== 'reduce' || this.rank === root;
    const kind = K[call] as Kind;
    const native: NativeCall = {
      kind,
      rule: SAME_COUNT,
      type: half ? 1 : MOVE_TYPE[d],
      op: REDUCE_CODE[op],
      root,
      desc: this.desc(call, d, op, root, count),
      counts: null,
      a: work,
      b: call === 'reduceScatter' ? out : null,
    };
    return {
      call: native,
      finish: () => {
        if (!receives) return;
        if (half) narrowHalf(out as Float32Array, d, output as Uint16Array);
      },
    };
  }

  allReduce(buf: CommArray, opts: { op?: ReduceOp; dtype?: HalfDtype } = {}): Work {
    return this.collective('allReduce', () =>
      this.reduction('allReduce', buf, dtypeOf(buf, opts.dtype), reduceOpOf(opts.op, 'allReduce'), 0, buf.length, buf),
    );
  }

  reduce(buf: CommArray, opts: { dst: number; op?: ReduceOp; dtype?: HalfDtype }): Work {
    return this.collective('reduce', () => {
      this.checkRoot(opts.dst, 'reduce dst');
      return this.reduction(
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
    return this.collective('reduceScatter', () => {
      if (input.length !== output.length * this.size || output.constructor !== input.constructor) {
        throw new InvalidArgumentError(
          `reduceScatter: input needs ${this.size} × ${output.length} elements of the output's type, got ${input.length}`,
          { op: 'reduceScatter' },
        );
      }
      return this.reduction(
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

  /** A call that moves elements without arithmetic (half dtypes as 16-bit words). */
  private move(
    call: OpName,
    d: Dtype,
    rule: number,
    root: number,
    count: number,
    a: CommArray | null,
    b: CommArray | null,
    perMember?: number[],
  ): NativeCall {
    const desc = this.desc(call, d, undefined, root, count, perMember);
    return { kind: K[call as keyof typeof K] as Kind, rule, type: MOVE_TYPE[d], op: 0, root, desc, counts: null, a, b };
  }

  broadcast(buf: CommArray, opts: { src: number; dtype?: HalfDtype }): Work {
    return this.collective('broadcast', () => {
      this.checkRoot(opts.src, 'broadcast src');
      const d = dtypeOf(buf, opts.dtype ?? 'float16');
      return { call: this.move('broadcast', d, SAME_COUNT, opts.src, buf.length, buf, null), finish: () => {} };
    });
  }

  allGather(input: CommArray, opts: { dtype?: HalfDtype } = {}): Work<CommArray[]> {
    return this.collective('allGather', () => {
      const d = dtypeOf(input, opts.dtype ?? 'float16');
      return {
        call: this.move('allGather', d, SAME_CALL, 0, input.length, input, null),
        finish: (out, all) => this.split(d, out, all),
      };
    });
  }

  allGatherInto(output: CommArray, input: CommArray, opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allGatherInto', () => {
      if (output.length !== input.length * this.size || output.constructor !== input.constructor) {
        throw new InvalidArgumentError(
          `allGatherInto: output needs ${this.size} × ${input.length} elements of the input's type, got ${output.length}`,
          { op: 'allGatherInto' },
        );
      }
      const d = dtypeOf(input, opts.dtype ?? 'float16');
      const call = {
        ...this.move('allGatherInto', d, SAME_COUNT, 0, input.length, input, null),
        kind: K.allGather as Kind,
      };
      return { call, finish: (out) => bytes(output).set(new Uint8Array(out)) };
    });
  }

  gather(input: CommArray, opts: { dst: number; dtype?: HalfDtype }): Work<CommArray[] | null> {
    return this.collective('gather', () => {
      this.checkRoot(opts.dst, 'gather dst');
      const d = dtypeOf(input, opts.dtype ?? 'float16');
      const call = this.move('gather', d, SAME_CALL, opts.dst, input.length, input, null);
      return { call, finish: (out, all) => (this.rank === opts.dst ? this.split(d, out, all) : null) };
    });
  }

  /** Per-member arrays out of a gathered buffer, sized by the members' descriptors. */
  private split(d: Dtype, out: ArrayBuffer, all: Int32Array | undefined): CommArray[] {
    const stride = FIXED + 2 * this.size;
    let off = 0;
    return Array.from({ length: this.size }, (_, r) => {
      const n = (all as Int32Array)[r * stride + 4];
      const a = viewAs(d, out, off, n);
      off += n * bytesPerElement(d);
      return a;
    });
  }

  scatter(output: CommArray, opts: { src: number; inputs?: CommArray[]; dtype?: HalfDtype }): Work {
    return this.collective('scatter', () => {
      this.checkRoot(opts.src, 'scatter src');
      const d = dtypeOf(output, opts.dtype ?? 'float16');
      if (this.rank !== opts.src)
        return { call: this.move('scatter', d, SAME_CALL, opts.src, output.length, null, output), finish: () => {} };
      const inputs = opts.inputs;
      if (!inputs || inputs.length !== this.size || inputs.some((a) => a.constructor !== output.constructor)) {
        throw new InvalidArgumentError(
          `scatter: the src rank needs ${this.size} inputs of the output's type, got ${inputs?.length ?? 0}`,
          { op: 'scatter' },
        );
      }
      const sizes = inputs.map((a) => a.length);
      return {
        call: this.move('scatter', d, SAME_CALL, opts.src, output.length, concat(output, inputs), output, sizes),
        finish: () => {},
      };
    });
  }

  allToAll(outputs: CommArray[], inputs: CommArray[], opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allToAll', () => {
      if (outputs.length !== this.size || inputs.length !== this.size) {
        throw new InvalidArgumentError(
          `allToAll: needs ${this.size} outputs and inputs, got ${outputs.length} and ${inputs.length}`,
          { op: 'allToAll' },
        );
      }
      const like = inputs[0] as CommArray;
      if ([...inputs, ...outputs].some((a) => a.constructor !== like.constructor)) {
        throw new InvalidArgumentError('allToAll: inputs and outputs must all be one array type', { op: 'allToAll' });
      }
      const d = dtypeOf(like, opts.dtype ?? 'float16');
      const received = concat(like, outputs);
      const call = this.move(
        'allToAll',
        d,
        SAME_CALL,
        0,
        0,
        concat(like, inputs),
        received,
        [...inputs, ...outputs].map((a) => a.length),
      );
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

  barrier(): Work {
    return this.collective('barrier', () => ({
      call: this.move('barrier', 'float32', SAME_CALL, 0, 0, null, null),
      finish: () => {},
    }));
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
    if (this.destroyed())
      throw new NotInitializedError(`rank ${this.me}: batchIsendIrecv after destroyProcessGroup`, {
        rank: this.me,
        op: 'batchIsendIrecv',
      });
    const entries: number[] = [];
    let off = 0;
    for (const o of ops) {
      this.checkRoot(o.peer, `${o.op} peer`);
      if (o.peer === this.rank) throw new InvalidArgumentError(`rank ${this.me}: ${o.op} to itself`, { op: o.op });
      dtypeOf(o.buf, o.dtype ?? 'float16');
      entries.push(o.op === 'isend' ? 1 : 0, o.peer, o.tag ?? 0, off, o.buf.byteLength);
      off += Math.ceil(o.buf.byteLength / 8) * 8;
    }
    const staged = new Uint8Array(off);
    const at = (i: number) => entries[i * 5 + 3];
    ops.forEach((o, i) => {
      if (o.op === 'isend') staged.set(bytes(o.buf), at(i));
    });
    const call: NativeCall = {
      kind: K.p2p as Kind,
      rule: 0,
      type: 4,
      op: 0,
      root: 0,
      desc: null,
      counts: Int32Array.from(entries),
      a: staged,
      b: null,
    };
    const run = this.rt.run(this.comm, 'batchIsendIrecv', call, this.timeoutMs).then(() => {
      ops.forEach((o, i) => {
        if (o.op === 'irecv') bytes(o.buf).set(staged.subarray(at(i), at(i) + o.buf.byteLength));
      });
    });
    return makeWork(run);
  }
}

/** Arrays one after another in a new array of `like`'s type. */
function concat(like: CommArray, arrays: CommArray[]): CommArray {
  const all = new (like.constructor as new (n: number) => CommArray)(arrays.reduce((s, a) => s + a.length, 0));
  let off = 0;
  for (const a of arrays) {
    all.set(a as never, off);
    off += a.length;
  }
  return all;
}
