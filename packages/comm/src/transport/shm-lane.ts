import type { CommArray, HalfDtype, ReduceOp } from '../dtypes.js';
import { CommError } from '../errors.js';
import type { OpContext } from '../execution/op-context.js';
import { native, type SharedMemory } from '../native.js';
import type { Fingerprint } from './frame.js';
import { beginExchange, Exchanged, P } from './shm-exchange.js';

/**
 * Shared memory of one process group whose ranks all share a host (@ddp/shm, optional).
 * One segment per group, mapped by every member; inside it each executor thread (comm,
 * main) has a lane of its own: per-rank progress counters and two sets of per-rank data
 * slots. Beside them, every rank records the fingerprint of each collective it starts —
 * on whichever thread and transport — so a rank in a shared-memory collective sees at
 * once that a peer called something else.
 *
 * Layout (bytes): [0, 64) header (attach count) · bells, one 64-byte line per rank (the bell,
 * bumped on every publish and futex-woken when the next word, its count of sleepers, is not 0)
 * · progress, one line per (lane, rank) · fingerprint table, TABLE entries per rank · data,
 * per lane: 2 sets × size slots.
 */
export const Lane = { Comm: 0, Main: 1 } as const;
export type Lane = (typeof Lane)[keyof typeof Lane];

const LINE = 64;
const TABLE = 256;
const ENTRY_WORDS = 8;
/** Slot sizes per lane: the main thread only runs small collectives (op-dispatcher.ts's onMainThread). */
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
    const why = `shared memory for a group of ${size}: ${(e as Error).message} (DDP_TRANSPORT=uds: sockets)`;
    throw new CommError(`rank ${rank}: ${why}`, { rank, op: 'newGroup' });
  }
  if (Atomics.add(new Int32Array(sab, 0, 1), 0, 1) + 1 === size) mem.unlink(name);
  return sab;
}

/** What a step of a shared-memory op waits for: `probe()` about group rank r to give a value (null: not yet). */
export interface ShmWait {
  r: number;
  probe: () => unknown;
  /** The group ranks not there yet (a timeout names them). */
  missing: () => number[];
  /** The probe spun already (in the addon): block at once. */
  spun?: boolean;
}
/** A step: a wait on a peer, or work elsewhere (across hosts) to await. */
export type ShmStep = ShmWait | Promise<unknown>;
export type ShmSteps = Generator<ShmStep, void, unknown>;
/** waitNow's answer when the budget of blocking on this thread ran out. */
const LATE = Symbol('late');

/** How long the addon spins for ranks that outnumber the cores (the executor gives them no spin budget). */
const YIELD_SPIN_MS = Number(process.env.DDP_SHM_YIELD_SPIN_MS) || 0.5;

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
  /** The addon's exchange parameters (shm-exchange.ts), reused by every op. */
  private readonly params = new Int32Array(P.length);
  /** How long the addon spins for a peer before JavaScript blocks on its bell. */
  private readonly spinUs: number;

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
    // ranks that outnumber the cores get no spin budget from the executor; the addon's spin
    // yields the core between looks (as Open MPI's under --oversubscribe), so they may spin too
    this.spinUs = Math.round(1000 * (waits.spinMs > 0 ? waits.spinMs : YIELD_SPIN_MS));
    this.params.set([size, rank, this.bell(0), this.progress(0), this.entry(0, 0), 0, this.slotBytes]);
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

  /** Bumps this rank's bell; wakes its sleepers (counted by the next word), no system call when none. */
  private ring(): void {
    const at = this.bell(this.rank);
    Atomics.add(this.words, at, 1);
    if (Atomics.load(this.words, at + 1) > 0) this.mem.wake(this.sab, at * 4);
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
  *meet(ctx: OpContext): Generator<ShmWait, void, unknown> {
    const seq = ctx.fp.seq;
    const absent = () => this.peers.filter((r) => this.fingerprintOf(r, seq) === null);
    for (const r of this.peers) {
      const theirs = (yield { r, probe: () => this.fingerprintOf(r, seq), missing: absent }) as Fingerprint | 'passed';
      if (theirs === 'passed') ctx.mismatch(ctx.group.ranks[r], `something else at seq ${seq} (it has gone past it)`);
      ctx.check(theirs, r);
    }
  }

  /** Publishes the next step of this lane and waits until every rank has reached it. */
  *step(): Generator<ShmWait, void, unknown> {
    const target = ++this.gen;
    Atomics.store(this.words, this.progress(this.rank), target);
    this.ring();
    const reached = (r: number) => Atomics.load(this.words, this.progress(r)) >= target;
    const behind = () => this.peers.filter((r) => !reached(r));
    for (const r of this.peers) yield { r, probe: () => (reached(r) ? true : null), missing: behind };
  }

  /** A small all-reduce in one step, in the addon (shm-exchange.ts); waits past its spin are yielded like any other. */
  *exchange(ctx: OpContext, data: CommArray, op: ReduceOp, half: HalfDtype | null): ShmSteps {
    yield* this.exchangeRest(ctx, data, this.exchangeStart(ctx.fp, data, op, half));
  }

  /** The exchange's first call, which allocates nothing: Exchanged.Done when peers were prompt. */
  exchangeStart(fp: Fingerprint, data: CommArray, op: ReduceOp, half: HalfDtype | null): number {
    const slots = this.at.lanes[this.lane] + this.nextSet() * this.size * this.slotBytes;
    beginExchange(this.params, fp, ++this.gen, slots, data, op, half, this.spinUs);
    return this.mem.exchange(this.sab, this.params, data);
  }

  /** The rest of an exchange whose first call returned `status`: a late peer waited on, a mismatch raised. */
  *exchangeRest(ctx: OpContext, data: CommArray, status: number): ShmSteps {
    if (status === Exchanged.Done) return;
    const p = this.params;
    // a peer is late or called something else: only now the closures a wait needs
    const probe = () => (this.mem.exchange(this.sab, p, data) === Exchanged.Late ? null : true);
    const absent = (r: number) =>
      this.fingerprintOf(r, p[P.seq]) === null || Atomics.load(this.words, this.progress(r)) < p[P.gen];
    const missing = () => this.peers.filter(absent);
    p[P.spinUs] = 0;
    for (; status !== Exchanged.Done; status = this.mem.exchange(this.sab, p, data)) {
      const r = p[P.peer];
      if (status === Exchanged.Mismatch) {
        const theirs = this.fingerprintOf(r, p[P.seq]);
        if (theirs !== null && theirs !== 'passed') ctx.check(theirs, r);
        ctx.mismatch(ctx.group.ranks[r], `something else at seq ${p[P.seq]} (it has gone past it)`);
      }
      yield { r, probe, missing, spun: true };
    }
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
   * Drives an op's steps (algorithms/shm.ts) on the event loop: each wait through `until`,
   * each promise (work across hosts) awaited. `resume` is a step already taken from `steps`.
   */
  async drive(steps: ShmSteps, ctx: OpContext, resume?: ShmStep): Promise<void> {
    let next = resume ?? null;
    if (!next) {
      const r = steps.next();
      if (r.done) return;
      next = r.value;
    }
    for (;;) {
      const r = steps.next(next instanceof Promise ? await next : await this.until(next, ctx));
      if (r.done) return;
      next = r.value;
    }
  }

  /**
   * Drives the steps on this thread, with no turn of the event loop, while every wait ends
   * within the spin-and-block budget: null when the op is done; else (a peer is late, or the
   * steps need the network) a promise that finishes it on the event loop.
   */
  driveNow(steps: ShmSteps, ctx: OpContext): Promise<void> | null {
    for (let r = steps.next(); !r.done; ) {
      const v = r.value instanceof Promise ? LATE : this.waitNow(r.value, ctx);
      if (v === LATE) return this.drive(steps, ctx, r.value);
      r = steps.next(v);
    }
    return null;
  }

  /**
   * Waits until `w.probe()` gives a value: spins briefly (the peer is often microseconds
   * away), then sleeps on its bell, blocking this thread (a futex wake-up is one context
   * switch) for up to blockMs; LATE after that. Checks the group's failure and the op's
   * deadline between sleeps; a timeout names the group ranks `w.missing()` returns.
   */
  private waitNow(w: ShmWait, ctx: OpContext): unknown {
    const first = w.probe();
    if (first !== null) return first;
    const spinEnd = w.spun ? 0 : performance.now() + this.waits.spinMs;
    while (performance.now() < spinEnd) {
      const v = w.probe();
      if (v !== null) return v;
    }
    const blockEnd = performance.now() + this.waits.blockMs;
    const at = this.bell(w.r);
    for (;;) {
      const bell = Atomics.load(this.words, at);
      const v = w.probe();
      if (v !== null) return v;
      const left = this.timeLeft(w, ctx);
      const block = blockEnd - performance.now();
      if (block <= 0) return LATE;
      Atomics.add(this.words, at + 1, 1);
      this.mem.waitSync(this.sab, at * 4, bell, Math.min(block, left));
      Atomics.sub(this.words, at + 1, 1);
    }
  }

  /** waitNow, then sleeps on the thread pool so this thread's event loop runs. */
  private async until(w: ShmWait, ctx: OpContext): Promise<unknown> {
    const now = this.waitNow(w, ctx);
    if (now !== LATE) return now;
    const at = this.bell(w.r);
    for (;;) {
      const bell = Atomics.load(this.words, at);
      const v = w.probe();
      if (v !== null) return v;
      const left = this.timeLeft(w, ctx);
      Atomics.add(this.words, at + 1, 1);
      await this.mem.wait(this.sab, at * 4, bell, Math.min(left, 50)).finally(() => Atomics.sub(this.words, at + 1, 1));
    }
  }

  /** Milliseconds left before the op's deadline; throws the group's failure, a lost peer's, or the timeout. */
  private timeLeft(w: ShmWait, ctx: OpContext): number {
    // a peer that left cleanly poisons nothing, but cannot arrive either
    const failure = ctx.group.failure ?? ctx.peerFailure(w.r);
    if (failure) throw failure;
    const left = ctx.deadline - Date.now();
    if (left <= 0) throw ctx.timeoutError(w.missing().map((p) => ctx.group.ranks[p]));
    return left;
  }
}
