/** Every error raised by @ddp/comm extends CommError and says which rank(s) and operation. */
export class CommError extends Error {
  override name = 'CommError';
  /** Global rank that raised the error (when known). */
  rank?: number;
  /** Ranks the error is about (the lost peer, the missing ranks, the mismatching rank). */
  ranks: number[] = [];
  /** Collective or store operation that failed. */
  op?: string;
  constructor(message: string, details: { rank?: number; ranks?: number[]; op?: string } = {}) {
    super(message);
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

/** A connection failed the HMAC challenge-response (wrong or missing secret). */
export class AuthError extends CommError {
  override name = 'AuthError';
}

/** A connection from or to another run: run ids (DDP_RUN_ID) differ, e.g. two worlds on one port. */
export class RunMismatchError extends CommError {
  override name = 'RunMismatchError';
}

/** The address a server must listen on (the store's MASTER_PORT) is taken by another process. */
export class AddressInUseError extends CommError {
  override name = 'AddressInUseError';
}

/** Ranks were started with different world sizes (WORLD_SIZE); names both sizes. */
export class WorldSizeMismatchError extends CommError {
  override name = 'WorldSizeMismatchError';
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
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof CommError) {
    return { name: err.name, message: err.message, rank: err.rank, ranks: err.ranks, op: err.op };
  }
  const e = err instanceof Error ? err : new Error(String(err));
  return { name: 'CommError', message: `${e.name}: ${e.message}` };
}

export function deserializeError(s: SerializedError): CommError {
  const Cls = errorClasses[s.name as keyof typeof errorClasses] ?? CommError;
  return new Cls(s.message, { rank: s.rank, ranks: s.ranks, op: s.op });
}
