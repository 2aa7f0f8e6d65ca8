import { CommError } from '../errors.js';
import type { OpContext } from '../execution/op-context.js';
import { native, type SharedMemory } from '../native.js';
import type { Fingerprint } from './frame.js';

/**
 * Shared memory of one process group whose ranks all share a host (@ddp/shm, optional).
 * One segment per group, mapped by every member; inside it each executor thread (comm,
 * main) has a lane of its own: per-rank progress counters and two sets of per-rank data
 * slots. Beside them, every rank records the fingerprint of each collective it starts —
 * on whichever thread and transport — so a rank in a shared-memory collective sees at
 * once that a peer called something else.
 *
 * Layout (bytes): [0, 64) header (attach count) · bells, one 64-byte line per rank (bumped
 * and futex-woken on every publish) · progress, one line per (lane, rank) · fingerprint
 * table, TABLE entries per rank · data, per lane: 2 sets × size slots.
 */
export const Lane = { Comm: 0, Main: 1 } as const;
export type Lane = (typeof Lane)[keyof typeof Lane];

const LINE = 64;
const TABLE = 256;
const ENTRY_WORDS = 8;
/** Slot sizes per lane: the main thread only runs small collectives (routing.ts). */
const SLOT_BYTES = [4 * 1024 * 1024, 64 * 1024] as const;

/** The addon for shared-memory collectives, unless absent or switched off (DDP_TRANSPORT=tcp or uds). */
export function sharedMemory(): SharedMemory | null {
  const transport = process.env.DDP_TRANSPORT;
  return transport === 'tcp' || transport === 'uds' ? null : native;
}

function layout(size: number) {
  const bells = LINE;
  const progress = bells + size * LINE;
  const table = progress + 2 * size * LINE;
  const data = table + size * TABLE * ENTRY_WORDS * 4;
  const lanes = [data, data + 2 * size * SLOT_BYTES[0]];
  return { bells, progress, table, lanes, total: lanes[1] + 2 * size * SLOT_BYTES[1] };
}

/** Maps (creating if first) the segment of a group; the last member to attach unlinks its name. */
export function mapSegment(mem: SharedMemory, name: string, size: number, rank: number): SharedArrayBuffer {
  let sab: SharedArrayBuffer;
  try {
    sab = mem.map(name, layout(size).total);
  } catch (e) {
    const why = `rank ${rank}: shared memory for a group of ${size}: ${(e as Error).message} (set DDP_TRANSPORT=uds to use sockets)`;
    throw new CommError(why, { rank, op: 'newGroup' });
  }
  if (Atomics.add(new Int32Array(sab, 0, 1), 0, 1) + 1 === size) mem.unlink(name);
  return sab;
}

/** One executor's view of a group segment. */
export class ShmLane {
  private readonly words: Int32Array;
  private readonly at: ReturnType<typeof layout>;
  /** Group ranks other than this one. */
  private readonly peers: number[];
  /** Progress of this lane: every rank's counter takes the same values in the same order. */
  private gen = 0;
  private piece = 0;
  readonly slotBytes: number;

  constructor(
    private readonly mem: SharedMemory,
    private readonly sab: SharedArrayBuffer,
    readonly size: number,
    readonly rank: number,
    private readonly lane: Lane,
    private readonly waits: { spinMs: number; blockMs: number },
  ) {
    this.words = new Int32Array(sab);
    this.at = layout(size);
    this.slotBytes = SLOT_BYTES[lane];
    this.peers = Array.from({ length: size }, (_, r) => r).filter((r) => r !== rank);
  }

  private bell(r: number): number {
    return (this.at.bells + r * LINE) / 4;
  }
  private progress(r: number): number {
    return (this.at.progress + (this.lane * this.size + r) * LINE) / 4;
  }
  private entry(r: number, seq: number): number {
    return (this.at.table + (r * TABLE + (seq % TABLE)) * ENTRY_WORDS * 4) / 4;
  }

  private ring(): void {
    Atomics.add(this.words, this.bell(this.rank), 1);
    this.mem.wake(this.sab, this.bell(this.rank) * 4);
  }

  /** Records that this rank started the collective `fp` (any transport). */
  record(fp: Fingerprint): void {
    const e = this.entry(this.rank, fp.seq);
    const w = this.words;
    w[e + 1] = fp.op;
    w[e + 2] = fp.dtype;
    w[e + 3] = fp.reduceOp;
    w[e + 4] = fp.count;
    w[e + 5] = fp.root;
    Atomics.store(w, e, fp.seq);
    this.ring();
  }

  /** Peer r's fingerprint for seq, null before it started it ('passed' if it ran far ahead). */
  private fingerprintOf(r: number, seq: number): Fingerprint | null | 'passed' {
    const e = this.entry(r, seq);
    const w = this.words;
    const s = Atomics.load(w, e);
    if (s !== seq) return s > seq ? 'passed' : null;
    const fp = { seq, op: w[e + 1], dtype: w[e + 2], reduceOp: w[e + 3], count: w[e + 4], root: w[e + 5] };
    return Atomics.load(w, e) === seq ? fp : 'passed';
  }

  /** Waits until every peer has started collective fp.seq, and checks they all called fp. */
  async meet(ctx: OpContext): Promise<void> {
    const seq = ctx.fp.seq;
    const absent = () => this.peers.filter((r) => this.fingerprintOf(r, seq) === null);
    for (const r of this.peers) {
      const theirs = await this.until(r, () => this.fingerprintOf(r, seq), ctx, absent);
      if (theirs === 'passed') ctx.mismatch(ctx.group.ranks[r], `something else at seq ${seq} (it has gone past it)`);
      ctx.check(theirs, r);
    }
  }

  /** Publishes the next step of this lane and waits until every rank has reached it. */
  async step(ctx: OpContext): Promise<void> {
    const target = ++this.gen;
    Atomics.store(this.words, this.progress(this.rank), target);
    this.ring();
    const reached = (r: number) => Atomics.load(this.words, this.progress(r)) >= target;
    const behind = () => this.peers.filter((r) => !reached(r));
    for (const r of this.peers) await this.until(r, () => (reached(r) ? true : null), ctx, behind);
  }

  /** The data set for the next piece: sets alternate, so writing one never races readers of the other. */
  nextSet(): number {
    return this.piece++ % 2;
  }

  /** Rank r's slot in a set, as bytes. */
  slot(set: number, r: number): Uint8Array {
    const base = this.at.lanes[this.lane] + (set * this.size + r) * this.slotBytes;
    return new Uint8Array(this.sab, base, this.slotBytes);
  }

  /**
   * Waits until `probe()` about peer r gives a value: spins briefly (the peer is often
   * microseconds away), then sleeps on its bell — blocking this thread for up to blockMs (a
   * futex wake-up is one context switch), then on the thread pool so this thread's event
   * loop runs — checking the group's failure and the op's deadline between sleeps. A
   * timeout names the group ranks `missing()` returns.
   */
  private async until<T>(r: number, probe: () => T | null, ctx: OpContext, missing: () => number[]): Promise<T> {
    const first = probe();
    if (first !== null) return first;
    const spinEnd = performance.now() + this.waits.spinMs;
    while (performance.now() < spinEnd) {
      const v = probe();
      if (v !== null) return v;
    }
    const blockEnd = performance.now() + this.waits.blockMs;
    const at = this.bell(r);
    for (;;) {
      const bell = Atomics.load(this.words, at);
      const v = probe();
      if (v !== null) return v;
      // a peer that left cleanly poisons nothing, but cannot arrive either
      const failure = ctx.group.failure ?? ctx.peerFailure(r);
      if (failure) throw failure;
      const left = ctx.deadline - Date.now();
      if (left <= 0) throw ctx.timeoutError(missing().map((p) => ctx.group.ranks[p]));
      const block = blockEnd - performance.now();
      if (block > 0) this.mem.waitSync(this.sab, at * 4, bell, Math.min(block, left));
      else await this.mem.wait(this.sab, at * 4, bell, Math.min(left, 50));
    }
  }
}
