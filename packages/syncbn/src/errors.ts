/** Bad use of SyncBatchNorm (no samples on any rank, a collective forward called synchronously). */
export class SyncBatchNormError extends Error {
  override name = 'SyncBatchNormError';
}
