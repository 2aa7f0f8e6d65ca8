/** Bad input to a contrastive loss or collective; names the rank and the operation. */
export class ContrastiveError extends Error {
  override readonly name = 'ContrastiveError';
  constructor(
    message: string,
    readonly rank: number,
    readonly op: string,
  ) {
    super(`rank ${rank}: ${op}: ${message}`);
  }
}
