import { directAllReduce } from '../algorithms/direct.js';
import { halfAllReduce } from '../algorithms/half.js';
import { ringAllReduce } from '../algorithms/ring.js';
import { shmAllReduce, shmAllReduceSteps } from '../algorithms/shm.js';
import {
  bytesPerElement,
  type CommArray,
  DTYPE_CODE,
  type Dtype,
  type NumArray,
  OP_CODE,
  REDUCE_CODE,
  type ReduceOp,
  viewAs,
} from '../dtypes.js';
import { CommError, laterCallError } from '../errors.js';
import type { SharedMemory } from '../native.js';
import type { OpResult, OpSpec } from '../scheduling/protocol.js';
import { type Fingerprint, type FrameHeader, FrameKind } from '../transport/frame.js';
import type { PeerMesh } from '../transport/peer-mesh.js';
import { Exchanged, ONE_STEP_BYTES } from '../transport/shm-exchange.js';
import type { Lane } from '../transport/shm-lane.js';
import { isHalf, numeric, runCollective } from './collectives.js';
import { describe, fingerprintOf } from './fingerprint.js';
import type { GroupState } from './group-state.js';
import { Groups } from './groups.js';
import { OpContext } from './op-context.js';
import { small, tuning } from './tuning.js';

const ALL_REDUCE = { op: 'allReduce' } as const;

/**
 * Runs the ops of every group on one thread (the main thread's executor or the comm
 * thread's; the same code): one queue per group (ops of a group run and complete in issue
 * order; groups proceed independently), and for an allReduce the choice of algorithm (the
 * other collectives choose in collectives.ts). A failure poisons the group (groups.ts).
 */
export class Executor {
  readonly groups: Groups;

  constructor(
    private readonly mesh: PeerMesh,
    mem: SharedMemory | null,
    lane: Lane,
  ) {
    this.groups = new Groups(mesh, mem, lane);
  }

  /** Queues the op behind the group's earlier ones; settles when it has run. */
  run(req: OpSpec): Promise<OpResult | undefined> {
    const g = this.groups.get(req.groupId);
    if (!g) return Promise.reject(new CommError(`unknown group ${req.groupId}`));
    const run = g.tail.then(() => this.execute(g, req));
    g.tail = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  private context(
    g: GroupState,
    req: Pick<OpSpec, 'timeoutMs' | 'seq'>,
    kind: FrameKind.Data | FrameKind.P2P,
    fp: Omit<FrameHeader, 'payloadLength' | 'kind' | 'groupId' | 'aux'>,
  ): OpContext {
    return new OpContext(
      this.mesh,
      g,
      fp,
      kind,
      Date.now() + req.timeoutMs,
      (err) => this.groups.fail(g, err, 'here'),
      () => this.groups.probe.behind(g.id, g.ranks, req.seq),
    );
  }

  private async execute(g: GroupState, req: OpSpec): Promise<OpResult | undefined> {
    const fp = req.op === 'p2p' ? null : fingerprintOf(req);
    if (g.failure) throw laterCallError(g.failure, this.mesh.opts.rank, fp ? describe(fp) : 'send/recv');
    try {
      if (!fp) {
        await this.runP2P(g, req);
        return undefined;
      }
      g.startedSeq = req.seq;
      const ctx = this.context(g, req, FrameKind.Data, fp);
      g.shm?.record(ctx.fp);
      const result = req.op === 'allReduce' ? await allReduce(ctx, req) : await runCollective(ctx, req);
      await ctx.flush();
      return result ?? undefined;
    } catch (e) {
      throw this.failed(g, req, e);
    }
  }

  /** The fingerprint of runNow's op, rewritten in place by each (the fast path allocates none). */
  private readonly nowFp: Fingerprint = { op: OP_CODE.allReduce, dtype: 0, reduceOp: 0, count: 0, seq: 0, root: 0 };

  /**
   * Runs small allReduce number `seq` over this group's shared memory at once, on this thread,
   * on `data` (op-dispatcher.ts's fast path: no earlier op of the group is in flight, so none is
   * queued here). undefined when it cannot (no shared memory here, the group spans hosts, data
   * larger than a slot); null when done; else a late peer's promise that finishes it, now the
   * group's current op. It fails as execute does: thrown or rejected, the group poisoned. A
   * one-step exchange whose peers are prompt allocates nothing: the context, closures and
   * steps of a wait are built only once a peer is late or called something else. `lateData`:
   * where a late one-step exchange writes its result instead of `data` (which it has read).
   */
  runNow(
    groupId: number,
    seq: number,
    timeoutMs: number,
    data: CommArray,
    dtype: Dtype,
    op: ReduceOp,
    lateData: (() => CommArray) | null = null,
  ): Promise<void> | null | undefined {
    const g = this.groups.get(groupId);
    const lane = g?.shm;
    if (!g || !lane || g.hosts || data.byteLength > lane.slotBytes) return undefined;
    const fp = this.nowFp;
    fp.dtype = DTYPE_CODE[dtype];
    fp.reduceOp = REDUCE_CODE[op];
    fp.count = data.length;
    fp.seq = seq;
    if (g.failure) throw laterCallError(g.failure, this.mesh.opts.rank, describe(fp));
    try {
      g.startedSeq = seq;
      const half = isHalf(dtype) ? dtype : null;
      const oneStep = data.byteLength <= ONE_STEP_BYTES;
      const status = oneStep ? lane.exchangeStart(fp, data, op, half) : Exchanged.Late;
      if (status === Exchanged.Done) return null;
      const ctx = this.context(g, { timeoutMs, seq }, FrameKind.Data, { ...fp });
      if (!oneStep) lane.record(ctx.fp);
      const steps = oneStep
        ? lane.exchangeRest(ctx, lateData ? lateData() : data, status)
        : shmAllReduceSteps(ctx, lane, data, op, half);
      const late = lane.driveNow(steps, ctx);
      if (!late) return null;
      const run = late.catch((e) => {
        throw this.failed(g, ALL_REDUCE, e);
      });
      g.tail = run.catch(() => {});
      return run;
    } catch (e) {
      throw this.failed(g, ALL_REDUCE, e);
    }
  }

  /** The error an op failed with (the group's first failure if any), after poisoning the group. */
  private failed(g: GroupState, req: Pick<OpSpec, 'op'>, e: unknown): CommError {
    const me = this.mesh.opts.rank;
    const err =
      g.failure ??
      (e instanceof CommError
        ? e
        : new CommError(`rank ${me}: ${req.op} failed: ${String(e)}`, { rank: me, op: req.op }));
    // receives this op posted may still be waiting: nothing later in this group can be trusted
    this.groups.fail(g, err, 'here');
    return err;
  }

  /** A batch of sends and receives, all in flight at once; completes when all are done. */
  private async runP2P(g: GroupState, req: OpSpec): Promise<void> {
    const sab = req.sab as SharedArrayBuffer;
    await Promise.all(
      (req.p2p ?? []).map((e) => {
        const peerGlobal = g.ranks[e.peer];
        const ctx = this.context(g, req, FrameKind.P2P, {
          op: OP_CODE.send,
          dtype: DTYPE_CODE[e.dtype],
          reduceOp: 0,
          count: e.count,
          seq: g.nextP2P(e.kind, peerGlobal, e.tag),
          root: e.tag,
        });
        const bytes = new Uint8Array(sab, e.byteOffset, e.count * bytesPerElement(e.dtype));
        if (e.kind === 'send') {
          ctx.sendMessage(e.peer, bytes);
          return ctx.flush();
        }
        return ctx.recvMessageInto(e.peer, bytes);
      }),
    );
  }
}

/**
 * The choice of an allReduce's algorithm: over the group's shared memory when it has some
 * (all ranks on one host, or hierarchical for a group spanning hosts evenly, except 16-bit
 * words); else over sockets, 16-bit words through algorithms/half.ts, others flat.
 */
function allReduce(ctx: OpContext, req: OpSpec): Promise<void> {
  const g = ctx.group;
  const half = isHalf(req.dtype) ? req.dtype : null;
  if (g.shm && !(g.hosts && half)) {
    const data = viewAs(req.dtype, req.sab as SharedArrayBuffer, req.sabOffset, req.length);
    if (!g.hosts) return shmAllReduce(ctx, g.shm, data, req.reduceOp, half);
    const across = { ctx: ctx.among(g.hosts.across), total: g.size, allReduce: flatAllReduce };
    return shmAllReduce(ctx.among(g.hosts.local), g.shm, data, req.reduceOp, null, across);
  }
  if (half) {
    const words = viewAs(half, req.sab as SharedArrayBuffer, req.sabOffset, req.length) as Uint16Array;
    return halfAllReduce(ctx, words, half, req.reduceOp, !small(ctx, words.byteLength), tuning.segmentBytes);
  }
  const { work, done } = numeric(req);
  return flatAllReduce(ctx, work, req.reduceOp).then(done);
}

/** All-reduce over sockets: one round while small (tuning.ts), else the pipelined ring. */
function flatAllReduce(ctx: OpContext, data: NumArray, op: ReduceOp): Promise<void> {
  return small(ctx, data.byteLength)
    ? directAllReduce(ctx, data, op)
    : ringAllReduce(ctx, data, op, tuning.segmentBytes);
}
