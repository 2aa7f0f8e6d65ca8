import { makeWork, type Work } from '../api/work.js';
import type { CommArray, Dtype } from '../dtypes.js';
import type { CommThread } from './comm-thread.js';
import type { MainRunner } from './main-runner.js';
import type { OpRequest, OpResult } from './protocol.js';
import { onMainThread } from './routing.js';
import { bytes, type StagingPool } from './staging.js';

/**
 * Hands a process group's ops to the thread that runs them (routing.ts): stages the data in
 * a shared buffer, numbers the collectives, and completes their Works in issue order.
 */
export class OpDispatcher {
  private seq = 0;

  /** Settles when every Work issued so far has (Works complete in issue order). */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly comm: CommThread,
    /** Runs small collectives on the main thread; null to use only the comm thread. */
    private readonly main: MainRunner | null,
    private readonly staging: StagingPool,
    private readonly groupId: number,
    private readonly size: number,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Stages `bytes` of data in a shared buffer, runs the op on the worker, then lets
   * `finish` copy results out before the buffer is reused.
   */
  submit<T>(
    req: Omit<OpRequest, 'type' | 'id' | 'seq' | 'sab' | 'sabOffset' | 'timeoutMs' | 'groupId'>,
    stageBytes: number,
    fill: (sab: SharedArrayBuffer) => void,
    finish: (sab: SharedArrayBuffer, result: OpResult | undefined) => T,
  ): Work<T> {
    const seq = req.op === 'p2p' ? 0 : ++this.seq;
    const sab = stageBytes > 0 ? this.staging.acquire(stageBytes) : null;
    if (sab) fill(sab);
    const promise = this.dispatch(
      { ...req, seq, sab, sabOffset: 0, groupId: this.groupId, timeoutMs: this.timeoutMs },
      stageBytes,
    )
      .then((result) => finish(sab as SharedArrayBuffer, result))
      .finally(() => this.staging.release(sab));
    return makeWork(promise);
  }

  /**
   * Runs the op on the main thread or the comm thread (routing.ts) and holds its result
   * back until every earlier Work of this group has completed.
   */
  private dispatch(req: Omit<OpRequest, 'type' | 'id'>, bytes: number): Promise<OpResult | undefined> {
    const onMain = this.main !== null && onMainThread(req.op, bytes, this.size);
    if (!onMain && req.op !== 'p2p') this.main?.executor.routedAway(this.groupId, req.seq, req.op);
    const run = onMain ? (this.main as MainRunner).run(req) : this.comm.run(req);
    const prev = this.tail;
    const ordered = run.then(
      (r) => prev.then(() => r),
      (e) =>
        prev.then(() => {
          throw e;
        }),
    );
    this.tail = ordered.catch(() => {});
    return ordered;
  }

  inPlace(op: OpRequest['op'], buf: CommArray, d: Dtype, extra: Partial<OpRequest>, copyBack: boolean): Work {
    if (buf.buffer instanceof SharedArrayBuffer && (op === 'allReduce' || op === 'broadcast')) {
      // the caller's array is shared memory already: the worker works on it in place
      const promise = this.dispatch(
        {
          op,
          dtype: d,
          reduceOp: 'sum',
          root: 0,
          count: buf.length,
          length: buf.length,
          ...extra,
          seq: ++this.seq,
          sab: buf.buffer,
          sabOffset: buf.byteOffset,
          groupId: this.groupId,
          timeoutMs: this.timeoutMs,
        },
        buf.byteLength,
      );
      return makeWork(promise.then(() => {}));
    }
    return this.submit(
      { op, dtype: d, reduceOp: 'sum', root: 0, count: buf.length, length: buf.length, ...extra },
      buf.byteLength,
      (sab) => new Uint8Array(sab, 0, buf.byteLength).set(bytes(buf)),
      (sab) => {
        if (copyBack) bytes(buf).set(new Uint8Array(sab, 0, buf.byteLength));
      },
    );
  }
}
