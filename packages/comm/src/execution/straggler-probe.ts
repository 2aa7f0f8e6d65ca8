import { type FrameHeader, FrameKind } from '../transport/frame.js';
import type { PeerMesh } from '../transport/peer-mesh.js';

/**
 * Names the ranks that never arrived at a collective that timed out: every other member is
 * asked which collective of the group it last started, and answers the same question.
 */
export class StragglerProbe {
  private nextId = 1;
  private readonly pending = new Map<number, (peer: number, startedSeq: number) => void>();

  constructor(
    private readonly mesh: PeerMesh,
    /** The seq of the collective of a group this rank last started (0: none yet). */
    private readonly startedSeq: (groupId: number) => number,
  ) {}

  /** Answers a peer's probe or takes its reply; false when the frame is neither. */
  handle(peer: number, h: FrameHeader): boolean {
    if (h.kind === FrameKind.Probe) {
      const aux = this.startedSeq(h.groupId);
      this.mesh.write(peer, { ...h, kind: FrameKind.ProbeReply, payloadLength: 0, aux }, null);
      return true;
    }
    if (h.kind === FrameKind.ProbeReply) {
      this.pending.get(h.root)?.(peer, h.aux);
      return true;
    }
    return false;
  }

  /**
   * The other members of the group still before `seq` (or silent for a second): the ranks
   * that never arrived.
   */
  behind(groupId: number, ranks: readonly number[], seq: number): Promise<number[]> {
    const id = this.nextId++;
    const me = this.mesh.opts.rank;
    const others = ranks.filter((r) => r !== me);
    const started = new Map<number, number>();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.pending.delete(id);
        // silent peers count as missing unless they are gone (that is reported as their loss)
        resolve(others.filter((r) => (started.has(r) ? (started.get(r) as number) < seq : !this.mesh.isLost(r))));
      };
      const timer = setTimeout(finish, 1000);
      this.pending.set(id, (peer, s) => {
        started.set(peer, s);
        if (started.size === others.length) finish();
      });
      const h: FrameHeader = {
        payloadLength: 0,
        kind: FrameKind.Probe,
        op: 0,
        dtype: 0,
        reduceOp: 0,
        groupId,
        seq,
        count: 0,
        root: id,
        aux: 0,
      };
      for (const r of others) this.mesh.write(r, h, null);
    });
  }
}
