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

/**
 * Raised on the active ranks, and on joined ranks that could shadow, when a joined rank cannot
 * shadow this iteration's collectives (that rank raises its own error, naming why). No collective
 * of the iteration went out, so the group stays usable.
 */
export class JoinShadowError extends Error {
  override readonly name = 'JoinShadowError';
  constructor(
    /** The global rank that raised it. */
    readonly rank: number,
    role: string,
  ) {
    super(
      `join: rank ${rank} ${role}, and a rank that joined cannot shadow this iteration's collectives ` +
        '(that rank raises why); every rank stops here',
    );
  }
}
