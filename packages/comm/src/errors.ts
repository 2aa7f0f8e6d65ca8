/** Every error raised by @ddp/comm extends CommError and says which rank(s) and operation. */
export class CommError extends Error {
  override name = 'CommError';
  /** Global rank that raised the error (when known). */
  rank?: number;
  /** Ranks the error is about (the lost peer, the missing ranks, the mismatching rank). */
  ranks: number[] = [];
  /** Collective or store operation that failed. */
  op?: string;
  constructor(message: string, details: { rank?: number; ranks?: number[]; op?: string; cause?: unknown } = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.rank = details.rank;
    this.ranks = details.ranks ?? [];
    this.op = details.op;
  }
}

/** A collective or store operation did not complete in time; `ranks` never arrived. */
export class CommTimeoutError extends CommError {
  override name = 'CommTimeoutError';
}

/** A peer's connection closed without a goodbye (the process died); `ranks` names it. */
export class PeerLostError extends CommError {
  override name = 'PeerLostError';
}

/**
 * This rank's own process did not run for longer than its peers wait (SIGSTOP, swapped out,
 * starved of CPU), so they gave it up: the loss it sees is its own doing, not a peer's.
 */
export class RankStalledError extends PeerLostError {
  override name = 'RankStalledError';
}

/** Ranks issued different collectives (op, dtype, count, root or sequence differ). */
export class CollectiveMismatchError extends CommError {
  override name = 'CollectiveMismatchError';
}

/**
 * Another member of the group failed a call of it (bad arguments, a crashed hook, an
 * abort) and aborted the group, so this rank's collective cannot complete: `ranks` names
 * that member, `cause` carries its error.
 */
export class GroupAbortedError extends CommError {
  override name = 'GroupAbortedError';
}

/** A connection failed the HMAC challenge-response (wrong or missing secret). */
export class AuthError extends CommError {
  override name = 'AuthError';
}

/** A connection from or to another run: run ids (DDP_RUN_ID) differ, e.g. two worlds on one port. */
export class RunMismatchError extends CommError {
  override name = 'RunMismatchError';
}

/**
 * The two sides are attempts of one run (ddp-run's restarts), the server the earlier: its store
 * lingers until that attempt's rank 0 exits, and the new one takes the port after it. A store
 * client of the later attempt waits; the server does not warn. The earlier attempt's ranks still
 * meeting in that store raise it too: a later attempt knocked (its node restarted), so theirs ends.
 */
export class EarlierAttemptError extends RunMismatchError {
  override name = 'EarlierAttemptError';
}

/** The address a server must listen on (the store's MASTER_PORT) is taken by another process. */
export class AddressInUseError extends CommError {
  override name = 'AddressInUseError';
}

/** Ranks were started with different world sizes (WORLD_SIZE); names both sizes. */
export class WorldSizeMismatchError extends CommError {
  override name = 'WorldSizeMismatchError';
}

/** Two processes claimed one rank (two launchers given one --node-rank); names both. */
export class DuplicateRankError extends WorldSizeMismatchError {
  override name = 'DuplicateRankError';
}

/** Bytes on a connection did not parse (bad magic, out-of-bounds length, unknown kind). */
export class ProtocolError extends CommError {
  override name = 'ProtocolError';
}

/** The default process group was used before initProcessGroup (or after destroy). */
export class NotInitializedError extends CommError {
  override name = 'NotInitializedError';
}

/** Arguments that cannot be valid on any rank (wrong lengths, bad root, bad dtype). */
export class InvalidArgumentError extends CommError {
  override name = 'InvalidArgumentError';
}

const errorClasses = {
  CommError,
  CommTimeoutError,
  PeerLostError,
  RankStalledError,
  CollectiveMismatchError,
  GroupAbortedError,
  AuthError,
  RunMismatchError,
  AddressInUseError,
  WorldSizeMismatchError,
  ProtocolError,
  NotInitializedError,
  InvalidArgumentError,
} as const;

/** Plain-object form of a CommError, for crossing the worker-thread boundary. */
export interface SerializedError {
  name: string;
  message: string;
  rank?: number;
  ranks?: number[];
  op?: string;
  cause?: SerializedError;
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof CommError) {
    const cause = err.cause === undefined ? undefined : serializeError(err.cause);
    return { name: err.name, message: err.message, rank: err.rank, ranks: err.ranks, op: err.op, cause };
  }
  const e = err instanceof Error ? err : new Error(String(err));
  return { name: 'CommError', message: `${e.name}: ${e.message}` };
}

export function deserializeError(s: SerializedError): CommError {
  const Cls = errorClasses[s.name as keyof typeof errorClasses] ?? CommError;
  return new Cls(s.message, { rank: s.rank, ranks: s.ranks, op: s.op, cause: s.cause && deserializeError(s.cause) });
}

/** Errors about the whole group (not one rank's call): a peer learning of one raises the same class. */
const GROUP_WIDE = new Set(['CollectiveMismatchError', 'CommTimeoutError', 'PeerLostError', 'GroupAbortedError']);

/**
 * What this rank raises when member `from` reports that it aborted the group with `s`: the
 * same class for a fact about the whole group (a mismatch, a lost peer, a timeout), else a
 * GroupAbortedError naming that member, its error as the cause.
 */
export function reportedError(s: SerializedError, from: number, me: number, groupId: number): CommError {
  const what = `(reported by rank ${from} to rank ${me})`;
  if (GROUP_WIDE.has(s.name)) {
    const Cls = errorClasses[s.name as keyof typeof errorClasses];
    const ranks = s.ranks?.length ? s.ranks : [from];
    return new Cls(`${s.message} ${what}`, { rank: me, ranks, op: s.op, cause: s.cause && deserializeError(s.cause) });
  }
  return new GroupAbortedError(`rank ${me}: rank ${from} aborted process group ${groupId}: ${s.name}: ${s.message}`, {
    rank: me,
    ranks: [from],
    op: s.op,
    cause: deserializeError(s),
  });
}

/**
 * The error of a call made on a group that already failed, naming the refused call, the
 * first failure as its cause: of the first failure's class when that is a fact about the
 * whole group or this rank's own stall (so `instanceof` still says what went wrong), else a GroupAbortedError.
 */
export function laterCallError(first: CommError, me: number, call: string): CommError {
  // a lost peer, or this rank's own stall (RankStalledError), is as true of every later call
  const keep = GROUP_WIDE.has(first.name) || first instanceof PeerLostError;
  const Cls = keep ? (first.constructor as typeof CommError) : GroupAbortedError;
  return new Cls(`rank ${me}: ${call} refused: the process group failed earlier: ${first.name}: ${first.message}`, {
    rank: me,
    ranks: first.ranks,
    op: call,
    cause: first,
  });
}

/** An abort frame's error (text that does not parse is kept as a mismatch's message). */
export function parseAbort(payload: Uint8Array): SerializedError {
  const text = Buffer.from(payload).toString('utf8');
  try {
    const s = JSON.parse(text) as SerializedError;
    if (typeof s?.name === 'string' && typeof s.message === 'string') return s;
  } catch {}
  return { name: 'CollectiveMismatchError', message: text };
}
