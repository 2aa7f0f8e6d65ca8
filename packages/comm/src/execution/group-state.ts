import type { NumArray } from '../dtypes.js';
import type { CommError } from '../errors.js';
import type { ShmLane } from '../transport/shm-lane.js';

/** Worker-side state of one process group: its members and the failure that poisoned it. */
export class GroupState {
  /** Ops run one after another: each waits for the previous one's promise. */
  tail: Promise<void> = Promise.resolve();
  /** Once set, every later op of this group fails with it (peer lost, mismatch, timeout); shared with its parts. */
  get failure(): CommError | null {
    return this.parent ? this.parent.failure : this.ownFailure;
  }
  set failure(err: CommError | null) {
    if (this.parent) this.parent.failure = err;
    else this.ownFailure = err;
  }
  private ownFailure: CommError | null = null;
  /**
   * A group spanning hosts evenly: this host's members, this rank's peers across hosts, and
   * the group rank of every (host, local index) (host-layout.ts).
   */
  hosts: { local: GroupState; across: GroupState; grid: readonly (readonly number[])[] } | null = null;
  /** Sequence number of the collective this rank most recently started (for timeout probes). */
  startedSeq = 0;
  /** Per (peer, tag) message counters of point-to-point traffic. */
  private readonly p2pCounters = new Map<string, number>();

  constructor(
    readonly id: number,
    /** Global ranks of the members, in group-rank order. */
    readonly ranks: readonly number[],
    /** This process's rank within the group. */
    readonly rank: number,
    /** This thread's lane of the shared memory of the members on this host (all of them, or `local`'s). */
    readonly shm: ShmLane | null,
    /** The group this one is a part of (a part shares its id, frames and failure). */
    private readonly parent: GroupState | null = null,
  ) {}

  /** The members at group ranks `at` as a group of their own: same id and failure, this rank's lane if given. */
  part(at: readonly number[], shm: ShmLane | null): GroupState {
    return new GroupState(
      this.id,
      at.map((i) => this.ranks[i]),
      at.indexOf(this.rank),
      shm,
      this,
    );
  }

  get size(): number {
    return this.ranks.length;
  }

  /** Group rank of a global rank (−1 when not a member). */
  groupRankOf(globalRank: number): number {
    return this.ranks.indexOf(globalRank);
  }

  /**
   * A grow-only scratch array of `like`'s type and length (AVG's partial sums on the ring; ops of a group run one at a
   * time).
   */
  scratch<T extends NumArray>(like: T): T {
    const bytes = like.byteLength;
    if (!this.scratchBuffer || this.scratchBuffer.byteLength < bytes) this.scratchBuffer = new ArrayBuffer(bytes);
    return new (like.constructor as new (b: ArrayBuffer, o: number, n: number) => T)(
      this.scratchBuffer,
      0,
      like.length,
    );
  }
  private scratchBuffer: ArrayBuffer | null = null;

  nextP2P(direction: 'send' | 'recv', peer: number, tag: number): number {
    const key = `${direction}:${peer}:${tag}`;
    const n = (this.p2pCounters.get(key) ?? 0) + 1;
    this.p2pCounters.set(key, n);
    return n;
  }
}
