/** Bad use of ZeroRedundancyOptimizer (wrong stage, state dict not consolidated, mismatched groups). */
export class ZeroError extends Error {
  override readonly name = 'ZeroError';
}
