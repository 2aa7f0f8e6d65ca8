/** A replica thread failed (its error names the replica and the operation), or DataParallel was misused. */
export class DataParallelError extends Error {
  override name = 'DataParallelError';
}
