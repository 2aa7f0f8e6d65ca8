// The errors of checkpoint directories (checkpoint.ts, checkpoint-lock.ts; @ddp/zero and @ddp/fsdp raise them too).

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

/** A checkpoint directory's commit lock stayed taken past the wait limit (see checkpoint-lock.ts). */
export class CheckpointLockError extends CheckpointError {
  override name = 'CheckpointLockError';
  constructor(
    readonly dir: string,
    /** The lock files that held it: `.lock-<host>-<pid>-<hex>`. */
    readonly holders: string[],
    waitedMs: number,
  ) {
    super(
      `${dir}: the commit lock is still held after ${waitedMs} ms by ${holders.join(', ')} ` +
        '(another process saving into this directory; remove the file if no such process runs)',
    );
  }
}
