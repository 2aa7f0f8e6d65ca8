import { makeWork, type Work } from '../api/work.js';
import { arraysOverlap, type CommArray, checkMovable, type Dtype, type ReduceOp } from '../dtypes.js';
import { ONE_STEP_BYTES } from '../transport/shm-exchange.js';
import { int32Average } from './int32-average.js';
import type { OpRequest, OpResult } from './protocol.js';
import { bytes, LateStaging, type StagingPool } from './staging.js';
import type { CommThread, MainRunner } from './threads.js';

/**
 * Which thread runs a collective. Small all-to-all-shaped collectives (every rank sends to
 * every other: allReduce, reduceScatter, allGatherInto, barrier) run on the main thread;
 * everything else, and everything large, on the comm thread. The rule reads only what all
 * ranks agree on when their calls match (op, element count, dtype, group size); when calls
 * differ, ranks may pick different threads, and because in these ops every rank sends to
 * every other, frames then reach a rank on the mesh it did not pick, which is reported as a
 * CollectiveMismatchError like any other difference.
 */
const MAIN_OPS = new Set<OpRequest['op']>(['allReduce', 'reduceScatter', 'allGatherInto', 'barrier']);

function limit(): number {
  const raw = process.env.DDP_MAIN_THREAD_BYTES;
  const v = Number(raw);
  return raw === undefined || raw === '' || !Number.isFinite(v) || v < 0 ? 16 * 1024 : v;
}

const MAIN_THREAD_BYTES = limit();

/**
 * True when the op runs on the main thread: (N−1)·bytes ≤ DDP_MAIN_THREAD_BYTES (16 KiB; 0 =
 * never), or any size in a group of one, where nothing travels and a trip to the comm thread
 * and back would be all the cost (DDP on one rank).
 */
export function onMainThread(op: OpRequest['op'], bytes: number, groupSize: number): boolean {
  if (MAIN_THREAD_BYTES === 0 || !MAIN_OPS.has(op)) return false;
  return groupSize === 1 || bytes * (groupSize - 1) <= MAIN_THREAD_BYTES;
}

/** The arrays an op reads when it is issued and writes when it completes. */
export interface OpIO {
  reads: readonly CommArray[];
  writes: readonly CommArray[];
}

type ArrayCtor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => CommArray;

/** The Work of an op the fast path completed before returning it. */
const DONE: Work = makeWork(Promise.resolve());

/**
 * Hands a process group's ops to the thread that runs them (onMainThread; threads.ts carries
 * them there, to that thread's Executor.run): stages the data in a shared buffer, numbers
 * the collectives, and completes their Works in issue order.
 */
export class OpDispatcher {
  private seq = 0;
  /** Works issued and not yet settled: the fast path runs only when none is. */
  private pending = 0;

  /** Settles when every Work issued so far has (Works complete in issue order). */
  private tail: Promise<unknown> = Promise.resolve();
  /** Arrays that pending Works write when they complete. */
  private readonly writing = new Set<CommArray>();
  /**
   * While an op waits to be dispatched (its input is an earlier op's output), the promise
   * that settles once it is: later ops are dispatched after it, so each executor still
   * receives the group's collectives in issue order.
   */
  private gate: Promise<unknown> | null = null;

  constructor(
    private readonly comm: CommThread,
    /** Runs small collectives on the main thread; null to use only the comm thread. */
    private readonly main: MainRunner | null,
    private readonly staging: StagingPool,
    private readonly groupId: number,
    readonly size: number,
    private readonly timeoutMs: number,
  ) {
    this.lateStaging = new LateStaging(staging);
  }

  private readonly lateStaging: LateStaging;

  /**
   * Stages `bytes` of data in a shared buffer, runs the op on the worker, then lets
   * `finish` copy results out before the buffer is reused. An op reading an array that an
   * earlier pending op writes stages it only once that op completed (as PyTorch's stream
   * order would read the earlier result), and runs after it.
   */
  submit<T>(
    req: Omit<OpRequest, 'type' | 'id' | 'seq' | 'sab' | 'sabOffset' | 'timeoutMs' | 'groupId'>,
    stageBytes: number,
    fill: (sab: SharedArrayBuffer) => void,
    finish: (sab: SharedArrayBuffer, result: OpResult | undefined) => T,
    io: OpIO,
  ): Work<T> {
    const seq = req.op === 'p2p' ? 0 : ++this.seq;
    const sab = stageBytes > 0 ? this.staging.acquire(stageBytes) : null;
    const late = this.readsPending(io);
    if (sab && !late) fill(sab);
    const run = this.dispatchInOrder(
      late,
      { ...req, seq, sab, sabOffset: 0, groupId: this.groupId, timeoutMs: this.timeoutMs },
      stageBytes,
      () => {
        if (sab && late) fill(sab);
      },
    );
    return this.inOrder(
      run,
      (result) => finish(sab as SharedArrayBuffer, result),
      () => this.staging.release(sab),
      io.writes,
    );
  }

  /** Whether the op reads an array a pending Work writes. */
  private readsPending(io: OpIO): boolean {
    for (const w of this.writing) if (io.reads.some((r) => arraysOverlap(r, w))) return true;
    return false;
  }

  /**
   * Dispatches the op now, or, when it reads a pending op's output (`late`) or an earlier
   * op is still held back, once every earlier Work completed (late) or that op went out;
   * `before` runs just before.
   */
  private dispatchInOrder(
    late: boolean,
    req: Omit<OpRequest, 'type' | 'id'>,
    bytes: number,
    before: () => void = () => {},
  ): Promise<OpResult | undefined> {
    const dispatch = this.route(req, bytes);
    const after = late ? this.tail : this.gate;
    if (!after) return dispatch();
    const run = after.then(() => {
      before();
      return dispatch();
    });
    // settles when this op is dispatched (its Work may settle much later)
    const gate = after.then(() => {});
    this.gate = gate;
    void gate.then(() => {
      if (this.gate === gate) this.gate = null;
    });
    return run;
  }

  /**
   * Picks the thread that runs the op (onMainThread), telling the other executor at once (it
   * may see the op's frames before the op is dispatched); the returned call dispatches it.
   */
  private route(req: Omit<OpRequest, 'type' | 'id'>, bytes: number): () => Promise<OpResult | undefined> {
    const onMain = this.main !== null && onMainThread(req.op, bytes, this.size);
    if (!onMain && req.op !== 'p2p') this.main?.executor.groups.routedAway(this.groupId, req.seq, req.op);
    return onMain ? () => (this.main as MainRunner).run(req) : () => this.comm.run(req);
  }

  /**
   * The Work of `run`: once every earlier Work of this group has completed, `finish` copies
   * the result out and `release` frees the staging either way. The Work's own promise is what
   * the next Work waits for, so a caller woken by a Work finds every earlier one complete
   * (their copies out done). Counted as pending, its `writes` as being written, until then.
   */
  private inOrder<R, T>(
    run: Promise<R>,
    finish: (r: R) => T,
    release: () => void,
    writes: readonly CommArray[],
  ): Work<T> {
    const prev = this.tail;
    this.pending++;
    // distinct entries per Work (a Set of the arrays themselves would drop a repeated one early)
    const mine = writes.map((w) => w.subarray(0));
    for (const w of mine) this.writing.add(w);
    const settle = () => {
      this.pending--;
      for (const w of mine) this.writing.delete(w);
      release();
    };
    const done = run.then(
      (r) =>
        prev.then(() => {
          try {
            return finish(r);
          } finally {
            settle();
          }
        }),
      (e) =>
        prev.then(() => {
          settle();
          throw e;
        }),
    );
    this.tail = done.catch(() => {});
    return makeWork(done);
  }

  /**
   * The fast path of a small allReduce: when no Work of the group is pending, it runs at once
   * on this thread over shared memory (Executor.runNow; a Work already done, or, if a peer is
   * late, one that finishes on the event loop). null when it cannot (onMainThread sends the op
   * elsewhere, no shared memory): the op takes the queue. A non-shared array (a view of a wasm
   * heap moves when the heap grows) is never written after this call returns: a one-step
   * exchange reads it in its first native call and, its peers prompt, writes it there too; a late
   * one finishes into staging, copied out at the end. Larger ones run on staging throughout.
   */
  private now(buf: CommArray, d: Dtype, reduceOp: ReduceOp): Work | null {
    const main = this.main;
    if (!main || this.pending > 0 || !onMainThread('allReduce', buf.byteLength, this.size)) return null;
    const shared = buf.buffer instanceof SharedArrayBuffer;
    const inPlaceFirst = shared || buf.byteLength <= ONE_STEP_BYTES;
    const sab = inPlaceFirst ? null : this.staging.acquire(buf.byteLength);
    const data = sab ? new (buf.constructor as ArrayCtor)(sab, 0, buf.length) : buf;
    if (sab) bytes(data).set(bytes(buf));
    // a plain array's late finish goes to staging (LateStaging: nothing allocated while peers are prompt)
    const stageLate = shared ? null : this.lateStaging.arm(buf);
    let late: Promise<void> | null | undefined;
    try {
      late = main.executor.runNow(this.groupId, this.seq + 1, this.timeoutMs, data, d, reduceOp, stageLate);
    } catch (e) {
      this.seq++;
      this.staging.release(sab ?? this.lateStaging.take()?.sab ?? null);
      return makeWork(Promise.reject(e));
    }
    const lateStaged = this.lateStaging.take();
    const staging = sab ?? lateStaged?.sab ?? null;
    const result = sab ? data : (lateStaged?.view ?? null);
    if (late === undefined) {
      this.staging.release(staging);
      return null;
    }
    this.seq++;
    if (late) {
      const copyOut = () => {
        if (result) bytes(buf).set(bytes(result));
      };
      return this.inOrder(late, copyOut, () => this.staging.release(staging), [buf]);
    }
    if (result) bytes(buf).set(bytes(result));
    this.staging.release(staging);
    return DONE;
  }

  /** An op on one array: read when issued, written back (`copyBack`) when it completes. */
  inPlace(op: OpRequest['op'], buf: CommArray, d: Dtype, extra: Partial<OpRequest>, copyBack: boolean): Work {
    if (d === 'int32' && extra.reduceOp === 'avg')
      return int32Average(this, op, buf as Int32Array, copyBack ? (buf as Int32Array) : null, 0, extra);
    const now = op === 'allReduce' ? this.now(buf, d, extra.reduceOp ?? 'sum') : null;
    if (now) return now;
    const io = { reads: [buf], writes: copyBack ? [buf] : [] };
    if (buf.buffer instanceof SharedArrayBuffer && (op === 'allReduce' || op === 'broadcast')) {
      // the caller's array is shared memory already: the worker works on it in place
      return this.onShared(op, buf, d, extra, { reads: [buf], writes: [buf] });
    }
    checkMovable(buf, op); // staged: a plain array over 4 GiB was a bare RangeError here (probe BP)
    return this.submit(
      { op, dtype: d, reduceOp: 'sum', root: 0, count: buf.length, length: buf.length, ...extra },
      buf.byteLength,
      (sab) => new Uint8Array(sab, 0, buf.byteLength).set(bytes(buf)),
      (sab) => {
        if (copyBack) bytes(buf).set(new Uint8Array(sab, 0, buf.byteLength));
      },
      io,
    );
  }

  /**
   * An op run on the caller's shared memory itself, no staging: the worker reads and writes
   * `buf` in place. `before` runs just before dispatch (once earlier ops wrote what it reads),
   * `finish` once the op and every earlier one completed.
   */
  onShared(
    op: OpRequest['op'],
    buf: CommArray,
    d: Dtype,
    extra: Partial<OpRequest>,
    io: OpIO,
    before: () => void = () => {},
    finish: () => void = () => {},
  ): Work {
    const late = this.readsPending(io);
    if (!late) before();
    const { groupId, timeoutMs } = this;
    const shared = { sab: buf.buffer as SharedArrayBuffer, sabOffset: buf.byteOffset, groupId, timeoutMs };
    const req = { op, dtype: d, reduceOp: 'sum' as const, root: 0, count: buf.length, length: buf.length, ...extra };
    const run = this.dispatchInOrder(
      late,
      { ...req, seq: ++this.seq, ...shared },
      buf.byteLength,
      late ? before : undefined,
    );
    return this.inOrder(run, finish, () => {}, io.writes);
  }
}
