/** Raised when a requested backend is unknown or cannot be initialised, or its settings are wrong. */
export class BackendError extends Error {
  override name = 'BackendError';
}

/** Raised when a fused op (layerNorm, gelu, softmax and their gradients) gets tensors of the wrong shape. */
export class FusedOpError extends Error {
  override name = 'FusedOpError';
}

/** Raised by argMax/argMin over an empty dim: there is no index to return (torch raises too). */
export class EmptyReductionError extends Error {
  override name = 'EmptyReductionError';
}

/** Raised when a raw tfjs op gets an index, axis or permutation outside its input (torch raises too). */
export class IndexBoundsError extends Error {
  override name = 'IndexBoundsError';
}
