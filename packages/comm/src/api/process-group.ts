import { type CommArray, dtypeOf, type HalfDtype, movedDtype, type ReduceOp, reduceOpOf } from '../dtypes.js';
import { CommError, NotInitializedError } from '../errors.js';
import { OpDispatcher } from '../scheduling/op-dispatcher.js';
import type { OpResult, P2PEntry } from '../scheduling/protocol.js';
import { allGatherIntoShared, reduceScatter } from '../scheduling/shared-in-place.js';
import { bytes, concatInto, type StagingPool, splitResult } from '../scheduling/staging.js';
import type { CommThread, MainRunner } from '../scheduling/threads.js';
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
} from './arg-checks.js';
import { isDestroyed } from './destroyed-groups.js';
import type { P2POp, ProcessGroup, ReduceScatterOptions } from './group.js';
import type { Work } from './work.js';

/** A process group whose collectives run on the process's comm worker thread. */
export class WorkerProcessGroup implements ProcessGroup {
  private readonly ops: OpDispatcher;

  constructor(
    private readonly comm: CommThread,
    /** Runs small collectives on the main thread (onMainThread); null to use only the comm thread. */
    private readonly main: MainRunner | null,
    readonly staging: StagingPool,
    readonly id: number,
    readonly ranks: readonly number[],
    readonly rank: number,
    readonly timeoutMs: number,
  ) {
    this.ops = new OpDispatcher(comm, main, staging, id, ranks.length, timeoutMs);
  }

  get size(): number {
    return this.ranks.length;
  }

  /** This rank's global rank (errors name it). */
  private get me(): number {
    return this.ranks[this.rank];
  }

  /** Any use after destroyProcessGroup raises at once (no op may reach a closed mesh or a peer's shared memory). */
  private checkAlive(call: string): void {
    if (this.comm.closed || this.main?.closed || isDestroyed(this)) {
      const me = this.me;
      const why = `rank ${me}: ${call} on a process group after destroyProcessGroup`;
      throw new NotInitializedError(why, { rank: me, op: call });
    }
  }

  /**
   * Starts a collective. A call that fails on this rank before it reaches an executor (bad
   * arguments) leaves the peers running a collective this rank skipped: its next call would
   * be matched against theirs. So the failure aborts the group, here and on every member,
   * as any other failure of a collective does (a group of one has nobody to fall out of step with).
   */
  private collective<T>(call: string, opts: object | undefined, start: () => Work<T>): Work<T> {
    this.checkAlive(call);
    try {
      checkOptionKeys(call, opts, COLLECTIVE_OPTIONS[call], this.me);
      return start();
    } catch (e) {
      if (this.size > 1) {
        const me = this.me;
        const err =
          e instanceof CommError
            ? e
            : new CommError(`rank ${me}: ${call} failed: ${e}`, { rank: me, op: call, cause: e });
        err.rank ??= me;
        err.op ??= call;
        this.abortGroup(err);
      }
      throw e;
    }
  }

  /** Poisons this group on both executors and tells every other member. */
  private abortGroup(err: CommError): void {
    if (this.main) this.main.executor.groups.abort(this.id, err);
    else this.comm.abort(this.id, err);
  }

  allReduce(buf: CommArray, opts: { op?: ReduceOp; dtype?: HalfDtype } = {}): Work {
    return this.collective('allReduce', opts, () =>
      this.ops.inPlace(
        'allReduce',
        buf,
        dtypeOf(buf, opts.dtype),
        { reduceOp: reduceOpOf(opts.op, 'allReduce') },
        true,
      ),
    );
  }

  broadcast(buf: CommArray, opts: { src: number; dtype?: HalfDtype }): Work {
    return this.collective('broadcast', opts, () => {
      checkRoot(opts.src, this.size, this.me, 'broadcast src');
      return this.ops.inPlace(
        'broadcast',
        buf,
        movedDtype(buf, opts.dtype, 'broadcast'),
        { root: opts.src },
        this.rank !== opts.src,
      );
    });
  }

  reduce(buf: CommArray, opts: { dst: number; op?: ReduceOp; dtype?: HalfDtype }): Work {
    return this.collective('reduce', opts, () => {
      checkRoot(opts.dst, this.size, this.me, 'reduce dst');
      return this.ops.inPlace(
        'reduce',
        buf,
        dtypeOf(buf, opts.dtype),
        { root: opts.dst, reduceOp: reduceOpOf(opts.op, 'reduce') },
        this.rank === opts.dst,
      );
    });
  }

  allGather(input: CommArray, opts: { dtype?: HalfDtype } = {}): Work<CommArray[]> {
    return this.collective('allGather', opts, () => {
      const d = movedDtype(input, opts.dtype, 'allGather');
      return this.ops.submit(
        { op: 'allGather', dtype: d, reduceOp: 'sum', root: 0, count: 0, length: input.length },
        input.byteLength,
        (sab) => new Uint8Array(sab, 0, input.byteLength).set(bytes(input)),
        (_, result) => splitResult(d, result as OpResult),
        { reads: [input], writes: [] },
      );
    });
  }

  allGatherInto(output: CommArray, input: CommArray, opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allGatherInto', opts, () => {
      checkGatherInto(output, input, this.size);
      const d = movedDtype(input, opts.dtype, 'allGatherInto');
      if (output.buffer instanceof SharedArrayBuffer) return allGatherIntoShared(this.ops, output, input, d, this.rank);
      return this.ops.submit(
        { op: 'allGatherInto', dtype: d, reduceOp: 'sum', root: 0, count: input.length, length: output.length },
        output.byteLength,
        (sab) => new Uint8Array(sab, this.rank * input.byteLength, input.byteLength).set(bytes(input)),
        (sab) => bytes(output).set(new Uint8Array(sab, 0, output.byteLength)),
        { reads: [input], writes: [output] },
      );
    });
  }

  reduceScatter(output: CommArray, input: CommArray, opts: ReduceScatterOptions = {}): Work {
    return this.collective('reduceScatter', opts, () => {
      checkReduceScatter(output, input, this.size, opts.overwriteInput);
      const op = reduceOpOf(opts.op, 'reduceScatter');
      return reduceScatter(this.ops, output, input, dtypeOf(input, opts.dtype), op, this.rank, opts.overwriteInput);
    });
  }

  gather(input: CommArray, opts: { dst: number; dtype?: HalfDtype }): Work<CommArray[] | null> {
    return this.collective('gather', opts, () => {
      checkRoot(opts.dst, this.size, this.me, 'gather dst');
      const d = movedDtype(input, opts.dtype, 'gather');
      return this.ops.submit(
        { op: 'gather', dtype: d, reduceOp: 'sum', root: opts.dst, count: 0, length: input.length },
        input.byteLength,
        (sab) => new Uint8Array(sab, 0, input.byteLength).set(bytes(input)),
        (_, result) => (this.rank === opts.dst ? splitResult(d, result as OpResult) : null),
        { reads: [input], writes: [] },
      );
    });
  }

  scatter(output: CommArray, opts: { src: number; inputs?: CommArray[]; dtype?: HalfDtype }): Work {
    return this.collective('scatter', opts, () => {
      checkRoot(opts.src, this.size, this.me, 'scatter src');
      const d = movedDtype(output, opts.dtype, 'scatter');
      if (this.rank !== opts.src) return this.ops.inPlace('scatter', output, d, { root: opts.src, count: 0 }, true);
      const inputs = opts.inputs;
      checkScatterInputs(output, inputs, this.size, this.rank, this.me);
      const own = inputs[this.rank] as CommArray;
      const total = inputs.reduce((s, a) => s + a.byteLength, 0);
      return this.ops.submit(
        {
          op: 'scatter',
          dtype: d,
          reduceOp: 'sum',
          root: opts.src,
          count: 0,
          length: output.length,
          sizes: inputs.map((a) => a.length),
        },
        total,
        (sab) => concatInto(sab, 0, inputs),
        () => bytes(output).set(bytes(own)),
        { reads: inputs, writes: [output] },
      );
    });
  }

  allToAll(outputs: CommArray[], inputs: CommArray[], opts: { dtype?: HalfDtype } = {}): Work {
    return this.collective('allToAll', opts, () => {
      checkAllToAll(outputs, inputs, this.size);
      const d = movedDtype(inputs[0] ?? outputs[0] ?? new Float32Array(0), opts.dtype, 'allToAll');
      const inBytes = inputs.reduce((s, a) => s + a.byteLength, 0);
      const outBytes = outputs.reduce((s, a) => s + a.byteLength, 0);
      return this.ops.submit(
        {
          op: 'allToAll',
          dtype: d,
          reduceOp: 'sum',
          root: 0,
          count: 0,
          length: 0,
          sizes: inputs.map((a) => a.length),
          outSizes: outputs.map((a) => a.length),
        },
        inBytes + outBytes,
        (sab) => concatInto(sab, 0, inputs),
        (sab) => {
          let off = inBytes;
          for (const o of outputs) {
            bytes(o).set(new Uint8Array(sab, off, o.byteLength));
            off += o.byteLength;
          }
        },
        { reads: inputs, writes: outputs },
      );
    });
  }

  barrier(...args: unknown[]): Work {
    const req = { op: 'barrier', dtype: 'float32', reduceOp: 'sum', root: 0, count: 0, length: 0 } as const;
    return this.collective('barrier', undefined, () => {
      checkNoArguments('barrier', args, this.me);
      return this.ops.submit(
        req,
        0,
        () => {},
        () => {},
        { reads: [], writes: [] },
      );
    });
  }

  send(buf: CommArray, dst: number, tag = 0, opts: { dtype?: HalfDtype } = {}): Work {
    return this.batchIsendIrecv([{ op: 'isend', buf, peer: dst, tag, dtype: opts.dtype }]);
  }

  recv(buf: CommArray, src: number, tag = 0, opts: { dtype?: HalfDtype } = {}): Work {
    return this.batchIsendIrecv([{ op: 'irecv', buf, peer: src, tag, dtype: opts.dtype }]);
  }

  /** Starts every send and receive at once; the Work completes when all have. */
  batchIsendIrecv(ops: P2POp[]): Work {
    this.checkAlive('batchIsendIrecv');
    const entries: P2PEntry[] = [];
    let off = 0;
    for (const o of ops) {
      checkPeer(o.op, o.peer, this.size, this.rank, this.me, o.tag ?? 0);
      entries.push({
        kind: o.op === 'isend' ? 'send' : 'recv',
        peer: o.peer,
        tag: o.tag ?? 0,
        dtype: movedDtype(o.buf, o.dtype, o.op),
        byteOffset: off,
        count: o.buf.length,
      });
      off += Math.ceil(o.buf.byteLength / 8) * 8;
    }
    return this.ops.submit(
      { op: 'p2p', dtype: 'float32', reduceOp: 'sum', root: 0, count: 0, length: 0, p2p: entries },
      off,
      (sab) => {
        ops.forEach((o, i) => {
          if (o.op === 'isend')
            new Uint8Array(sab, (entries[i] as P2PEntry).byteOffset, o.buf.byteLength).set(bytes(o.buf));
        });
      },
      (sab) => {
        ops.forEach((o, i) => {
          if (o.op === 'irecv')
            bytes(o.buf).set(new Uint8Array(sab, (entries[i] as P2PEntry).byteOffset, o.buf.byteLength));
        });
      },
      {
        reads: ops.filter((o) => o.op === 'isend').map((o) => o.buf),
        writes: ops.filter((o) => o.op === 'irecv').map((o) => o.buf),
      },
    );
  }
}
