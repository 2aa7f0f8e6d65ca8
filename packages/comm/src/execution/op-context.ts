import { type NumArray, OP_NAME, type ReduceOp } from '../dtypes.js';
import { CollectiveMismatchError, type CommError, CommTimeoutError } from '../errors.js';
import { startTimer } from '../timer.js';
import { type Fingerprint, type Frame, type FrameHeader, FrameKind, MAX_FRAME_PAYLOAD } from '../transport/frame.js';
import type { Sink } from '../transport/mailbox.js';
import type { PeerMesh } from '../transport/peer-mesh.js';
import { describe, sameFingerprint } from './fingerprint.js';
import type { GroupState } from './group-state.js';
import { CopySink, ReduceSink } from './sinks.js';

/**
 * What an algorithm sees of one collective: send/receive by group rank, with the
 * fingerprint stamped on every outgoing frame and checked on every incoming one.
 */
export class OpContext {
  private pendingWrites = 0;
  private drained: (() => void) | null = null;
  private writeError: Error | null = null;
  /** Ranks this op is waiting on right now (named by a timeout). */
  readonly waitingOn = new Map<number, number>();

  constructor(
    private readonly mesh: PeerMesh,
    readonly group: GroupState,
    readonly fp: Fingerprint,
    private readonly kind: FrameKind.Data | FrameKind.P2P,
    readonly deadline: number,
    /** Called on a mismatch so the whole group hears about it. */
    private readonly onMismatch: (err: CollectiveMismatchError) => void,
    /** Asks the group which ranks have not reached this collective (global ranks). */
    private readonly probe: () => Promise<number[]> = async () => [],
  ) {}

  /** The same op among a part of the group (GroupState.part): sends, receives and failures by that part's ranks. */
  among(part: GroupState): OpContext {
    return new OpContext(this.mesh, part, this.fp, this.kind, this.deadline, this.onMismatch, this.probe);
  }

  get rank(): number {
    return this.group.rank;
  }
  get size(): number {
    return this.group.size;
  }
  get name(): string {
    return describe(this.fp);
  }

  private header(payloadLength: number, aux: number): FrameHeader {
    return { ...this.fp, payloadLength, kind: this.kind, groupId: this.group.id, aux };
  }

  /** Sends one frame (payload ≤ MAX_FRAME_PAYLOAD) to a group rank. */
  send(to: number, payload: Uint8Array | null, aux = 0): void {
    this.pendingWrites++;
    this.mesh.write(this.group.ranks[to], this.header(payload?.byteLength ?? 0, aux), payload, (err) => {
      if (err) this.writeError ??= err;
      if (--this.pendingWrites === 0) this.drained?.();
    });
  }

  /** Sends bytes of any length as a run of frames. */
  sendMessage(to: number, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) {
      this.send(to, null);
      return;
    }
    for (let off = 0; off < bytes.byteLength; off += MAX_FRAME_PAYLOAD) {
      this.send(to, bytes.subarray(off, Math.min(bytes.byteLength, off + MAX_FRAME_PAYLOAD)));
    }
  }

  /** Receives the next frame from a group rank, checking its fingerprint. */
  async recv(from: number): Promise<Frame> {
    const frame = await this.wait(from, null);
    this.check(frame.header, from);
    return frame;
  }

  /** Receives one frame of exactly dst.byteLength bytes straight into dst; onHeader sees its header first. */
  recvInto(from: number, dst: Uint8Array, onHeader?: (h: FrameHeader) => void): Promise<Frame> {
    return this.wait(from, new CopySink(this, from, dst, onHeader));
  }

  /** Receives one frame of dst.byteLength bytes and reduces it into dst as it streams in. */
  recvReduce(from: number, dst: NumArray, op: ReduceOp): Promise<unknown> {
    return this.wait(from, new ReduceSink(this, from, dst, op));
  }

  /** Receives a message of exactly `dst.byteLength` bytes (a run of frames, see sendMessage). */
  async recvMessageInto(from: number, dst: Uint8Array): Promise<void> {
    if (dst.byteLength === 0) {
      await this.recvInto(from, dst);
      return;
    }
    const parts: Promise<unknown>[] = [];
    for (let off = 0; off < dst.byteLength; off += MAX_FRAME_PAYLOAD) {
      parts.push(this.recvInto(from, dst.subarray(off, Math.min(dst.byteLength, off + MAX_FRAME_PAYLOAD))));
    }
    await Promise.all(parts);
  }

  /** Posts a receive (into a sink if given) and waits for it, up to the op's deadline. */
  private async wait(from: number, sink: Sink | null): Promise<Frame> {
    const global = this.group.ranks[from];
    const box = this.mesh.mailboxes[global];
    if (!box) throw new Error(`no mailbox for rank ${global}`);
    const channel = this.kind === FrameKind.P2P ? `${this.group.id}:p:${this.fp.root}` : `${this.group.id}:c`;
    const { promise, cancel } = box.receive(channel, this.group.id, sink);
    this.waitingOn.set(global, (this.waitingOn.get(global) ?? 0) + 1);
    let stopTimer = () => {};
    try {
      return await Promise.race([
        promise,
        new Promise<never>((_, reject) => {
          stopTimer = startTimer(
            () => {
              cancel();
              const waiting = [...this.waitingOn.keys()];
              this.probe().then(
                (behind) => reject(this.timeoutError(behind.length > 0 ? behind : waiting)),
                () => reject(this.timeoutError(waiting)),
              );
            },
            Math.max(0, this.deadline - Date.now()),
          );
        }),
      ]);
    } finally {
      stopTimer();
      const left = (this.waitingOn.get(global) ?? 1) - 1;
      if (left > 0) this.waitingOn.set(global, left);
      else this.waitingOn.delete(global);
    }
  }

  /** Why a group rank can no longer take part (it left or was lost), else null. */
  peerFailure(groupRank: number): CommError | null {
    return this.mesh.mailboxes[this.group.ranks[groupRank]]?.failure ?? null;
  }

  /** Raises a mismatch unless the header carries this op's fingerprint. */
  check(h: Fingerprint, from: number): void {
    if (!sameFingerprint(h, this.fp)) this.mismatch(this.group.ranks[from], h);
  }

  /** Names the collective and the ranks that never arrived (or, failing that, the awaited ones). */
  timeoutError(missing: number[]): CommTimeoutError {
    return new CommTimeoutError(
      `rank ${this.mesh.opts.rank}: ${this.name} timed out: rank(s) ${missing.join(', ')} never arrived`,
      {
        rank: this.mesh.opts.rank,
        ranks: missing,
        op: OP_NAME[this.fp.op],
      },
    );
  }

  /** Raises (and announces) a mismatch with what a peer sent (or a description of it). */
  mismatch(peerGlobal: number, theirs: Fingerprint | string): never {
    const me = this.mesh.opts.rank;
    const what = typeof theirs === 'string' ? theirs : describe(theirs);
    const err = new CollectiveMismatchError(`rank ${me} called ${this.name} but rank ${peerGlobal} called ${what}`, {
      rank: me,
      ranks: [me, peerGlobal],
      op: OP_NAME[this.fp.op],
    });
    this.onMismatch(err);
    throw err;
  }

  /** Raises (and announces) a mismatch found by comparing every rank's call (agreement.ts); ranks are group ranks. */
  disagree(why: string, groupRanks: number[]): never {
    const me = this.mesh.opts.rank;
    const err = new CollectiveMismatchError(`rank ${me}: ${this.name}: ${why}`, {
      rank: me,
      ranks: groupRanks.map((r) => this.group.ranks[r]),
      op: OP_NAME[this.fp.op],
    });
    this.onMismatch(err);
    throw err;
  }

  lengthMismatch(fromGroupRank: number, expectedBytes: number, gotBytes: number): never {
    const me = this.mesh.opts.rank;
    const peer = this.group.ranks[fromGroupRank];
    const err = new CollectiveMismatchError(
      `rank ${me}: ${this.name} expected ${expectedBytes} bytes from rank ${peer} but got ${gotBytes}`,
      {
        rank: me,
        ranks: [me, peer],
        op: OP_NAME[this.fp.op],
      },
    );
    this.onMismatch(err);
    throw err;
  }

  /** Resolves once every frame this op sent has been handed to the kernel. */
  flush(): Promise<void> {
    if (this.writeError) return Promise.reject(this.writeError);
    if (this.pendingWrites === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.drained = () => {
        this.drained = null;
        if (this.writeError) reject(this.writeError);
        else resolve();
      };
    });
  }
}
