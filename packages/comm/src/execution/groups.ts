import { availableParallelism } from 'node:os';
import { CollectiveMismatchError, type CommError, parseAbort, reportedError, serializeError } from '../errors.js';
import type { SharedMemory } from '../native.js';
import type { HostLayout } from '../rendezvous/host-layout.js';
import { type Frame, type FrameHeader, FrameKind } from '../transport/frame.js';
import type { PeerMesh } from '../transport/peer-mesh.js';
import { type Lane, ShmLane } from '../transport/shm-lane.js';
import { describe } from './fingerprint.js';
import { GroupState } from './group-state.js';
import { StragglerProbe } from './straggler-probe.js';
import { tuning } from './tuning.js';

/**
 * The groups one executor runs (one per thread) and how they fail: any failure poisons the
 * group here and is announced to every other member; aborts and lost peers from the mesh,
 * frames of a collective this rank runs on its other thread, and the other thread's
 * poisoning all end here. Not on an op's path: the Executor asks it for a group's state and
 * reports failures to it.
 */
export class Groups {
  private readonly groups = new Map<number, GroupState>();
  readonly probe: StragglerProbe;
  /** Aborts that arrived before this rank created the group (newGroup runs late here). */
  private readonly earlyAborts = new Map<number, CommError>();
  /** Collectives (group → seq → op) this rank runs on its other executor (see op-dispatcher.ts's onMainThread). */
  private readonly away = new Map<number, Map<number, string>>();
  /** Called when a group is poisoned here, so the other executor can follow. */
  onPoison: (groupId: number, err: CommError) => void = () => {};

  constructor(
    private readonly mesh: PeerMesh,
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

  get(groupId: number): GroupState | undefined {
    return this.groups.get(groupId);
  }

  add(groupId: number, ranks: number[], shm: SharedArrayBuffer | null, hosts: HostLayout | null): void {
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

  /**
   * Poisons the group (its first failure is kept; every later op raises naming it) and wakes
   * every op of it waiting on a peer. A failure found here is announced to every other member
   * (as NCCL aborts a communicator), so no rank completes a collective this one gave up on or
   * matches its next call against the wrong one; a failure from a peer or from this
   * process's other executor is not echoed to the peers again.
   */
  fail(g: GroupState, err: CommError, from: 'here' | 'peer' | 'other thread'): void {
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
}
