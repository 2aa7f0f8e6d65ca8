import { availableParallelism } from 'node:os';
import { shmAllReduceSteps } from '../algorithms/shm.js';
import { bytesPerElement, type CommArray, DTYPE_CODE, OP_CODE } from '../dtypes.js';
import {
  CollectiveMismatchError,
  CommError,
  laterCallError,
  parseAbort,
  reportedError,
  serializeError,
} from '../errors.js';
import type { SharedMemory } from '../native.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import type { FromWorker, OpRequest, OpResult } from '../scheduling/protocol.js';
import { type Frame, type FrameHeader, FrameKind } from '../transport/frame.js';
import type { PeerMesh } from '../transport/peer-mesh.js';
import { type Lane, ShmLane } from '../transport/shm-lane.js';
import { runCollective, shmAllReduceOp } from './collectives.js';
import { GroupState } from './group-state.js';
import { describe, fingerprintOf, OpContext } from './op-context.js';
import { StragglerProbe } from './straggler-probe.js';
import { tuning } from './tuning.js';

/**
 * Runs the ops of every group on the worker thread: one queue per group (ops of a group
 * run and complete in issue order; groups proceed independently), failure propagation
 * (any failure poisons the group here and is announced to every other member).
 */
export class Executor {
  private readonly groups = new Map<number, GroupState>();
  private readonly probe: StragglerProbe;
  /** Aborts that arrived before this rank created the group (newGroup runs late here). */
  private readonly earlyAborts = new Map<number, CommError>();
  /** Collectives (group → seq → op) this rank runs on its other executor (see routing.ts). */
  private readonly away = new Map<number, Map<number, string>>();
  /** Called when a group is poisoned here, so the other executor can follow. */
  onPoison: (groupId: number, err: CommError) => void = () => {};

  constructor(
    private readonly mesh: PeerMesh,
    private readonly post: (m: FromWorker) => void,
    private readonly mem: SharedMemory | null,
    private readonly lane: Lane,
  ) {
    this.probe = new StragglerProbe(mesh, (groupId) => this.groups.get(groupId)?.startedSeq ?? 0);
    mesh.onPeerLost = (peer, err) => {
      for (const g of this.groups.values()) if (g.ranks.includes(peer)) this.fail(g, err, 'here');
    };
    mesh.onControl = (peer, f) => this.control(peer, f);
    mesh.admit = (peer, f) => this.admit(peer, f);
  }

  /**
   * This rank runs collective `seq` of the group on its other executor, so a frame of that
   * collective arriving here means the ranks disagree on what they are running.
   */
  routedAway(groupId: number, seq: number, op: string): void {
    let m = this.away.get(groupId);
    if (!m) {
      m = new Map();
      this.away.set(groupId, m);
    }
    m.set(seq, op);
    // collectives complete in order: ones far behind cannot receive frames any more
    if (m.size > 4096) for (const s of m.keys()) if (s < seq - 4096) m.delete(s);
    const g = this.groups.get(groupId);
    if (!g) return;
    for (const r of g.ranks) {
      const f = this.mesh.mailboxes[r]?.find(`${groupId}:c`, (h) => h.seq === seq);
      if (f) this.admit(r, f);
    }
  }

  private admit(peer: number, f: Frame): boolean {
    const h = f.header;
    const op = h.kind === FrameKind.Data ? this.away.get(h.groupId)?.get(h.seq) : undefined;
    const g = this.groups.get(h.groupId);
    if (op === undefined || !g) return true;
    const me = this.mesh.opts.rank;
    this.fail(
      g,
      new CollectiveMismatchError(`rank ${me} called ${op} (seq ${h.seq}) but rank ${peer} called ${describe(h)}`, {
        rank: me,
        ranks: [me, peer],
        op,
      }),
      'here',
    );
    return false;
  }

  /** The other executor poisoned the group: follow without echoing back. */
  adoptPoison(groupId: number, err: CommError): void {
    const g = this.groups.get(groupId);
    if (g && !g.failure) this.fail(g, err, 'other thread');
  }

  /**
   * A call on the group failed on this rank before it reached an executor (bad arguments, a failed hook): abort the
   * group.
   */
  abort(groupId: number, err: CommError): void {
    const g = this.groups.get(groupId);
    if (g) this.fail(g, err, 'here');
  }

  /** destroyProcessGroup: ops still waiting give up (the peers hear the goodbye, not an abort). */
  closeAll(err: CommError): void {
    for (const g of this.groups.values()) this.fail(g, err, 'other thread');
  }

  addGroup(groupId: number, ranks: number[], shm: SharedArrayBuffer | null, hosts: HostLayout | null): void {
    const rank = ranks.indexOf(this.mesh.opts.rank);
    const local = hosts?.local ?? ranks.map((_, i) => i);
    // ranks that outnumber the cores must not spin: a spinning rank holds the core its peer needs
    const spinMs = local.length > availableParallelism() ? 0 : tuning.shmSpinMs[this.lane];
    const waits = { spinMs, blockMs: tuning.shmBlockMs };
    const lane =
      shm && this.mem ? new ShmLane(this.mem, shm, local.length, local.indexOf(rank), this.lane, waits) : null;
    const g = new GroupState(groupId, ranks, rank, lane);
    if (hosts && lane)
      g.hosts = { local: g.part(hosts.local, lane), across: g.part(hosts.across, null), grid: hosts.grid };
    this.groups.set(groupId, g);
    for (const r of ranks) if (this.mesh.isLost(r)) this.fail(g, this.mesh.mailboxes[r]?.failure as CommError, 'here');
    const early = this.earlyAborts.get(groupId);
    if (early) this.fail(g, early, 'peer');
    this.earlyAborts.delete(groupId);
  }

  /**
   * Poisons the group (its first failure is kept; every later op raises naming it) and wakes
   * every op of it waiting on a peer. A failure found here is announced to every other member
   * (as NCCL aborts a communicator), so no rank completes a collective this one gave up on or
   * matches its next call against the wrong one; a failure from a peer or from this
   * process's other executor is not echoed to the peers again.
   */
  private fail(g: GroupState, err: CommError, from: 'here' | 'peer' | 'other thread'): void {
    if (g.failure) return;
    g.failure = err;
    if (from === 'here') {
      const payload = Buffer.from(JSON.stringify(serializeError(err)), 'utf8');
      const h: FrameHeader = {
        payloadLength: payload.length,
        kind: FrameKind.Abort,
        op: 0,
        dtype: 0,
        reduceOp: 0,
        groupId: g.id,
        seq: 0,
        count: 0,
        root: 0,
        aux: 0,
      };
      for (const r of g.ranks) if (r !== this.mesh.opts.rank) this.mesh.write(r, h, payload);
    }
    for (const r of g.ranks) this.mesh.mailboxes[r]?.failWaiters(err, g.id);
    if (from !== 'other thread') this.onPoison(g.id, err);
  }

  private control(peer: number, f: Frame): void {
    const h = f.header;
    if (this.probe.handle(peer, h)) return;
    if (h.kind !== FrameKind.Abort) return;
    const reported = reportedError(parseAbort(f.payload), peer, this.mesh.opts.rank, h.groupId);
    // peers that gave this rank up abort the group: a rank that was itself stopped must say so
    const err = this.mesh.ownStall(reported) ?? reported;
    const g = this.groups.get(h.groupId);
    if (!g) {
      this.earlyAborts.set(h.groupId, err);
      return;
    }
    this.fail(g, err, 'peer');
    for (const r of g.ranks) this.mesh.mailboxes[r]?.dropGroup(g.id);
  }

  submit(req: OpRequest): void {
    const g = this.groups.get(req.groupId);
    if (!g) {
      this.post({ type: 'done', id: req.id, error: serializeError(new CommError(`unknown group ${req.groupId}`)) });
      return;
    }
    const run = g.tail.then(() => this.execute(g, req));
    g.tail = run.then(
      () => {},
      () => {},
    );
    run.then(
      (result) => this.post({ type: 'done', id: req.id, result }),
      (err) => this.post({ type: 'done', id: req.id, error: serializeError(err) }),
    );
  }

  private context(
    g: GroupState,
    req: Pick<OpRequest, 'timeoutMs' | 'seq'>,
    kind: FrameKind.Data | FrameKind.P2P,
    fp: Omit<FrameHeader, 'payloadLength' | 'kind' | 'groupId' | 'aux'>,
  ): OpContext {
    return new OpContext(
      this.mesh,
      g,
      fp,
      kind,
      Date.now() + req.timeoutMs,
      (err) => this.fail(g, err, 'here'),
      () => this.probe.behind(g.id, g.ranks, req.seq),
    );
  }

  private async execute(g: GroupState, req: OpRequest): Promise<OpResult | undefined> {
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
      const result = g.shm && req.op === 'allReduce' ? await shmAllReduceOp(ctx, req) : await runCollective(ctx, req);
      await ctx.flush();
      return result ?? undefined;
    } catch (e) {
      throw this.failed(g, req, e);
    }
  }

  /**
   * Runs a small allReduce over this group's shared memory at once, on this thread, on `data`
   * (op-dispatcher.ts's fast path: no earlier op of the group is in flight, so none is queued
   * here). undefined when it cannot (no shared memory here, the group spans hosts, data
   * larger than a slot); null when done; else a late peer's promise that finishes it, now the
   * group's current op. It fails as execute does: thrown or rejected, the group poisoned.
   */
  runNow(req: Omit<OpRequest, 'type' | 'id' | 'sab' | 'sabOffset'>, data: CommArray): Promise<void> | null | undefined {
    const g = this.groups.get(req.groupId);
    const lane = g?.shm;
    if (!g || !lane || g.hosts || data.byteLength > lane.slotBytes) return undefined;
    const fp = fingerprintOf(req);
    if (g.failure) throw laterCallError(g.failure, this.mesh.opts.rank, describe(fp));
    try {
      g.startedSeq = req.seq;
      const ctx = this.context(g, req, FrameKind.Data, fp);
      lane.record(fp);
      const half = req.dtype === 'float16' || req.dtype === 'bfloat16' ? req.dtype : null;
      const late = lane.driveNow(shmAllReduceSteps(ctx, lane, data, req.reduceOp, half), ctx);
      if (!late) return null;
      const run = late.catch((e) => {
        throw this.failed(g, req, e);
      });
      g.tail = run.catch(() => {});
      return run;
    } catch (e) {
      throw this.failed(g, req, e);
    }
  }

  /** The error an op failed with (the group's first failure if any), after poisoning the group. */
  private failed(g: GroupState, req: Pick<OpRequest, 'op'>, e: unknown): CommError {
    const me = this.mesh.opts.rank;
    const err =
      g.failure ??
      (e instanceof CommError
        ? e
        : new CommError(`rank ${me}: ${req.op} failed: ${String(e)}`, { rank: me, op: req.op }));
    // receives this op posted may still be waiting: nothing later in this group can be trusted
    this.fail(g, err, 'here');
    return err;
  }

  /** A batch of sends and receives, all in flight at once; completes when all are done. */
  private async runP2P(g: GroupState, req: OpRequest): Promise<void> {
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
