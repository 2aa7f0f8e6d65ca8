/** GradScaler used out of order (unscale_ or step twice before update) or given bad options or state. */
export class GradScalerError extends Error {
  override name = 'GradScalerError';
}
