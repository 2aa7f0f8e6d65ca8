/** Raised on every rank by `join(..., { throwOnEarlyTermination: true })` once some rank ran out of inputs. */
export class EarlyTerminationError extends Error {
  override readonly name = 'EarlyTerminationError';
  constructor(
    /** The global rank that raised it. */
    readonly rank: number,
    why: string,
  ) {
    super(`join: rank ${rank} ${why}; uneven inputs detected, throwing on every rank (throwOnEarlyTermination)`);
  }
}

/** Bad arguments to `join`. */
export class JoinArgumentError extends Error {
  override readonly name = 'JoinArgumentError';
}
