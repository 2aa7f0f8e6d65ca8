import type { CallResult, Kind, MpiAddon } from '@ddp/mpi';
import { DTYPE_NAME, OP_NAME, REDUCE_NAME } from '../dtypes.js';
import {
  CollectiveMismatchError,
  CommError,
  CommTimeoutError,
  GroupAbortedError,
  InvalidArgumentError,
  laterCallError,
} from '../errors.js';
import { startTimer } from '../timer.js';
import { IssueOrder } from './mpi-issue-order.js';

// Status and descriptor layout of @ddp/mpi (src/mpi.cc), repeated here because comm loads the
// addon only when the 'mpi' backend is chosen (a value import would make it a hard dependency).
const REFUSED = 1;
const MPI_FAILED = 2;
const SIZE_MISMATCH = 3;
const FIXED = 6;
const FAILED_HERE = 5;
const SAME_CALL = 1;
/** Error classes a member's failed flag names (1 + index), so the others can say what it raised. */
const FAILURE_NAMES = [
  'CommError',
  'InvalidArgumentError',
  'CollectiveMismatchError',
  'GroupAbortedError',
  'CommTimeoutError',
  'PeerLostError',
  'NotInitializedError',
];
/** @ddp/mpi's Kind.split (its value: comm does not load the optional addon to compile). */
export const SPLIT = 1 as const;
const SAME_COUNT = 2;
const BARRIER = 11;

/** One native call: what runs, on which communicator, and how the members agree on it first. */
export interface NativeCall {
  kind: Kind;
  rule: number;
  type: number;
  op: number;
  root: number;
  desc: Int32Array | null;
  counts: Int32Array | null;
  a: ArrayBufferView | null;
  b: ArrayBufferView | null;
}

/** A communicator of the MPI backend: its handle, members (global ranks) and this rank in it. */
export interface MpiComm {
  handle: number;
  ranks: readonly number[];
  rank: number;
  /** First failure of a call on this communicator (every later call is refused). */
  failed: CommError | null;
}

/**
 * The process's MPI runtime: runs calls on the addon's MPI thread with a timeout. A call that
 * times out leaves that thread inside MPI for good (MPI cannot cancel a collective), so the
 * whole runtime fails: every later call, on any group, raises at once.
 */
export class MpiRuntime {
  /** A failure that left the MPI thread unusable (timeout, MPI error). */
  stuck: CommError | null = null;
  /** Calls staged and dispatched in issue order, after the unfinished ones whose arrays they touch. */
  readonly order: IssueOrder;

  constructor(
    readonly addon: MpiAddon,
    /** This process's rank in MPI_COMM_WORLD. */
    readonly globalRank: number,
    /** Whether @ddp/mpi runs each communicator on a thread of its own (MPI_THREAD_MULTIPLE granted). */
    threadPerGroup: boolean,
  ) {
    this.order = new IssueOrder(threadPerGroup);
  }

  /** Runs `c` on `comm`; the result once done, or the typed error every member raises. */
  async run(comm: MpiComm, call: string, c: NativeCall, timeoutMs: number): Promise<CallResult> {
    const first = this.stuck ?? comm.failed;
    if (first) throw laterCallError(first, this.globalRank, call);
    const started = this.addon.call(c.kind, comm.handle, c.rule, c.type, c.op, c.root, c.desc, c.counts, c.a, c.b);
    let stopTimer = () => {};
    const timedOut = new Promise<never>((_, reject) => {
      stopTimer = startTimer(() => reject(this.timeout(comm, call, timeoutMs)), timeoutMs);
    });
    try {
      const r = await Promise.race([started, timedOut]);
      if (r[0] === REFUSED)
        throw this.fail(
          comm,
          refusal(comm, call, r[1] as Int32Array, c.desc as Int32Array, this.globalRank, c.rule === SAME_COUNT),
        );
      if (r[0] === SIZE_MISMATCH) {
        throw this.fail(
          comm,
          new CollectiveMismatchError(`rank ${this.globalRank}: ${call}: ${r[3]}`, { rank: this.globalRank, op: call }),
        );
      }
      if (r[0] === MPI_FAILED) {
        const err = new CommError(`rank ${this.globalRank}: ${call}: MPI error: ${r[3]}`, {
          rank: this.globalRank,
          op: call,
        });
        this.stuck ??= err;
        throw this.fail(comm, err);
      }
      return r;
    } finally {
      stopTimer();
    }
  }

  /**
   * Takes part in the agreement of a call this rank failed (or refuses, after an earlier
   * failure), flagged as failed: the members waiting in it refuse it too instead of hanging.
   */
  announceFailure(comm: MpiComm, desc: Int32Array, err: CommError, timeoutMs: number): void {
    if (this.stuck) return;
    desc[FAILED_HERE] = 1 + Math.max(0, FAILURE_NAMES.indexOf(err.name));
    const p = this.addon.call(BARRIER as Kind, comm.handle, SAME_CALL, 1, 0, 0, desc, null, null, null);
    const stopTimer = startTimer(
      () => this.timeout(comm, `${OP_NAME[desc[0]]} (announcing its failure)`, timeoutMs),
      timeoutMs,
    );
    p.finally(stopTimer);
  }

  /** Records the first failure of `comm` and returns `err` for throwing. */
  fail(comm: MpiComm, err: CommError): CommError {
    comm.failed ??= err;
    return err;
  }

  private timeout(comm: MpiComm, call: string, ms: number): CommTimeoutError {
    const err = new CommTimeoutError(
      `rank ${this.globalRank}: ${call} on ranks [${comm.ranks.join(', ')}] did not complete within ${ms} ms ` +
        '(a member did not call it, stalled or died). MPI cannot cancel a collective: the mpi backend is unusable ' +
        'in this process from now on; end it (mpirun then stops the other ranks)',
      { rank: this.globalRank, ranks: comm.ranks.filter((r) => r !== this.globalRank), op: call },
    );
    this.stuck ??= err;
    // the stuck call must not keep the process alive once the program is done
    this.addon.unref();
    return this.fail(comm, err);
  }
}

/** A call's descriptor in words: `allReduce(float32 × 7, sum, root 0)`. */
function describe(d: Int32Array, at: number): string {
  const op = OP_NAME[d[at]] ?? `op ${d[at]}`;
  const reduce = REDUCE_NAME[d[at + 2]];
  return `${op}(${DTYPE_NAME[d[at + 1]]} × ${d[at + 4]}${reduce ? `, ${reduce}` : ''}, root ${d[at + 3]})`;
}

/**
 * The error of a call the members refused, the same class on every member: a member that
 * failed before calling (bad arguments here) makes the others raise GroupAbortedError naming
 * it; calls that differ raise CollectiveMismatchError naming the first member that differs.
 */
function refusal(
  comm: MpiComm,
  call: string,
  all: Int32Array,
  mine: Int32Array,
  me: number,
  sameCount: boolean,
): CommError {
  const size = comm.ranks.length;
  const stride = FIXED + 2 * size;
  const global = (r: number) => comm.ranks[r];
  const failed = Array.from({ length: size }, (_, r) => r).filter((r) => all[r * stride + FAILED_HERE] !== 0);
  if (failed.length > 0) {
    const who = failed.map(global);
    const name = FAILURE_NAMES[all[failed[0] * stride + FAILED_HERE] - 1] ?? 'CommError';
    const why = `rank ${me}: ${call} refused: rank ${who.join(', ')} failed its call (${name}, raised there)`;
    return new GroupAbortedError(why, { rank: me, ranks: who, op: call });
  }
  const fields = sameCount ? 5 : 4;
  for (let r = 0; r < size; r++) {
    if (mine.subarray(0, fields).every((v, i) => all[r * stride + i] === v)) continue;
    const theirs = describe(all, r * stride);
    const why = `rank ${me}: ${describe(mine, 0)} does not match rank ${global(r)}'s ${theirs}`;
    return new CollectiveMismatchError(why, { rank: me, ranks: [global(r)], op: call });
  }
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < size; j++) {
      const sent = all[i * stride + FIXED + j];
      const got = all[j * stride + FIXED + size + i] ?? 0;
      const root = all[i * stride + 3];
      const scatterSent = all[root * stride + FIXED + i];
      const differ =
        call === 'allToAll' ? sent !== got : call === 'scatter' && j === 0 && scatterSent !== all[i * stride + 4];
      if (!differ) continue;
      const what =
        call === 'allToAll'
          ? `rank ${global(i)} sends ${sent} elements to rank ${global(j)}, which expects ${got}`
          : `the root sends rank ${global(i)} ${scatterSent} elements, it expects ${all[i * stride + 4]}`;
      return new CollectiveMismatchError(`rank ${me}: ${call}: ${what}`, {
        rank: me,
        ranks: [global(i), global(j)],
        op: call,
      });
    }
  }
  const over = overflowingTotal(all, size, call);
  if (over !== null)
    return new InvalidArgumentError(
      `rank ${me}: ${call}: the members' counts add up to ${over} elements, and MPI's displacements are ` +
        'int (at most 2^31 − 1 in all): split the call',
      { rank: me, op: call },
    );
  return new CollectiveMismatchError(`rank ${me}: ${call}: the members' sizes do not fit together`, {
    rank: me,
    ranks: [...comm.ranks],
    op: call,
  });
}

/** The count a call adds up past int32 (the addon's Fits refused it): gathered, or one member's sends or receives. */
function overflowingTotal(all: Int32Array, size: number, call: string): number | null {
  const stride = FIXED + 2 * size;
  const sum = (from: number, n: number) => all.subarray(from, from + n).reduce((t, v) => t + v, 0);
  const totals = Array.from({ length: size }, (_, r) => [
    sum(r * stride + FIXED, size),
    sum(r * stride + FIXED + size, size),
  ]);
  if (call.startsWith('allGather') || call === 'gather')
    totals.push([Array.from({ length: size }, (_, r) => all[r * stride + 4]).reduce((t, v) => t + v, 0)]);
  const worst = Math.max(...totals.flat());
  return worst > 2 ** 31 - 1 ? worst : null;
}
