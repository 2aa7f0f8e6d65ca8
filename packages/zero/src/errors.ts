/** Bad use of ZeroRedundancyOptimizer (wrong stage, state dict not consolidated, mismatched groups). */
export class ZeroError extends Error {
  override readonly name = 'ZeroError';
}

/** A sharded checkpoint that is missing, incomplete, unreadable or does not fit the optimizer. */
export class ShardedCheckpointError extends Error {
  override readonly name = 'ShardedCheckpointError';
  /** The file at fault, when one is. */
  readonly file: string | undefined;
  constructor(message: string, file?: string) {
    super(message);
    this.file = file;
  }
}
